#ifndef SBX_BASE64_H
#define SBX_BASE64_H

#include <stddef.h>

/* A NUL-terminated base64 text of len bytes. */
char *base64_encode_alloc(const void *data, size_t len);
/* Decodes text (padding required); -1 if it is not base64. */
int base64_decode_alloc(const char *text, char **out, size_t *len);

#endif
