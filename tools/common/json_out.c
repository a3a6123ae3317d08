/* json_out.c — see json_out.h. */
#include "json_out.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>

#include "cli.h"

void hm_json_write_string(FILE *f, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        int ok = k > 0 && i + k <= n;
        for (size_t j = 1; ok && j < k; j++)
            ok = (p[i + j] & 0xC0) == 0x80;
        if (ok && k > 1) {
            unsigned cp = k == 2 ? c & 0x1F : k == 3 ? c & 0x0F : c & 0x07;
            for (size_t j = 1; j < k; j++)
                cp = cp << 6 | (p[i + j] & 0x3F);
            ok = (k == 2 && cp >= 0x80) ||
                 (k == 3 && cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) ||
                 (k == 4 && cp >= 0x10000 && cp <= 0x10FFFF);
        }
        if (!ok) {
            fputs("\\ufffd", f);
            i++;
            continue;
        }
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c == '\r')
            fputs("\\r", f);
        else if (c < 0x20 || c == 0x7F)
            fprintf(f, "\\u%04x", c);
        else
            fwrite(p + i, 1, k, f);
        i += k;
    }
    fputc('"', f);
}

void hm_json_put(cJSON *j)
{
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s)
        hm_die("out of memory");
    puts(s);
    free(s);
}

void hm_json_write_number(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.17g", v);
    else
        fprintf(f, "null");
}
