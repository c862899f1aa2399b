"""Operations on a whole catalog: online rebuild, verify and repair, shadow
mode, and the content walk they share."""
