/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * Our own rendering of help-mpi-btl-usnic.txt.  Open MPI's show_help
 * finds a plugin's help file only along its search path (4.1 and 5.0:
 * opal_show_help_add_dir), and on the v6.0.x branch and main it reads only
 * help text compiled into the library: a plugin's file is never found
 * there.  So the BTL renders its topics itself, from the file beside the
 * plugin or in Open MPI's data directory, framed the way show_help
 * frames them; Open MPI's renderer is the fallback when neither has it.
 */
#include "opal_config.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btl_usnic_help.h"

#define HELP_FRAME "--------------------------------------------------------------------------\n"
#define MAX_HELP_DIRS 4

static char *help_dirs[MAX_HELP_DIRS];
static int num_help_dirs;

bool opal_btl_usnic_help_via_runtime = false;

void opal_btl_usnic_help_add_dir(const char *dir)
{
    if (NULL == dir || num_help_dirs >= MAX_HELP_DIRS) {
        return;
    }
    for (int i = 0; i < num_help_dirs; ++i) {
        if (0 == strcmp(help_dirs[i], dir)) {
            return;
        }
    }
    char *copy = strdup(dir);
    if (NULL != copy) {
        help_dirs[num_help_dirs++] = copy;
    }
}

void opal_btl_usnic_help_clear_dirs(void)
{
    for (int i = 0; i < num_help_dirs; ++i) {
        free(help_dirs[i]);
        help_dirs[i] = NULL;
    }
    num_help_dirs = 0;
}

/* Is |line| (without its newline) the header "[topic]"? */
static bool is_topic_header(const char *line, size_t len, const char *topic)
{
    size_t tlen = strlen(topic);
    return len == tlen + 2 && '[' == line[0] && ']' == line[len - 1] && 0 == memcmp(line + 1, topic, tlen);
}

/* Append |n| bytes of |s| to the growing string *|text| of *|len| bytes */
static bool append(char **text, size_t *len, const char *s, size_t n)
{
    char *grown = (char *) realloc(*text, *len + n + 1);
    if (NULL == grown) {
        return false;
    }
    memcpy(grown + *len, s, n);
    *len += n;
    grown[*len] = '\0';
    *text = grown;
    return true;
}

char *opal_btl_usnic_help_topic(const char *path, const char *topic)
{
    FILE *f = fopen(path, "r");
    if (NULL == f) {
        return NULL;
    }
    char *line = NULL, *text = NULL;
    size_t cap = 0, len = 0;
    ssize_t n;
    bool inside = false, found = false, ok = true;
    while (ok && (n = getline(&line, &cap, f)) >= 0) {
        size_t bare = (size_t) n;
        while (bare > 0 && ('\n' == line[bare - 1] || '\r' == line[bare - 1])) {
            --bare;
        }
        if ('#' == line[0]) {
            continue; /* a comment, inside a topic or not */
        }
        if ('[' == line[0]) {
            if (inside) {
                break; /* the next topic */
            }
            inside = found = is_topic_header(line, bare, topic);
            continue;
        }
        if (inside) {
            ok = append(&text, &len, line, (size_t) n);
        }
    }
    free(line);
    fclose(f);
    if (!found || !ok) {
        free(text);
        return NULL;
    }
    return NULL != text ? text : strdup("");
}

char *opal_btl_usnic_help_vrender(const char *topic, va_list ap)
{
    for (int i = 0; i < num_help_dirs; ++i) {
        char *path = NULL;
        if (asprintf(&path, "%s/%s", help_dirs[i], OPAL_BTL_USNIC_HELP_FILE) < 0) {
            return NULL;
        }
        char *format = opal_btl_usnic_help_topic(path, topic);
        free(path);
        if (NULL == format) {
            continue;
        }
        char *body = NULL, *msg = NULL;
        va_list copy;
        va_copy(copy, ap);
        /* the file is ours, installed with the plugin: its formats match
         * the call sites' arguments (a topic per call site) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        int rc = vasprintf(&body, format, copy);
#pragma GCC diagnostic pop
        va_end(copy);
        free(format);
        if (rc < 0 || asprintf(&msg, HELP_FRAME "%s" HELP_FRAME, body) < 0) {
            msg = NULL;
        }
        free(body);
        return msg;
    }
    return NULL;
}

/* Read all of the file at |path| (malloc'ed, *|len_p| bytes), or NULL */
static char *slurp(const char *path, size_t *len_p)
{
    FILE *f = fopen(path, "r");
    if (NULL == f) {
        return NULL;
    }
    char *text = NULL;
    size_t len = 0;
    char chunk[4096];
    size_t n;
    bool ok = true;
    while (ok && (n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        ok = append(&text, &len, chunk, n);
    }
    fclose(f);
    if (!ok) {
        free(text);
        return NULL;
    }
    *len_p = len;
    return NULL != text ? text : strdup("");
}

bool opal_btl_usnic_help_same_text(const char *first, const char *ours)
{
    size_t alen = 0, blen = 0;
    char *a = slurp(first, &alen);
    if (NULL == a) {
        return true; /* nothing in front of ours */
    }
    char *b = slurp(ours, &blen);
    bool same = NULL == b || (alen == blen && 0 == memcmp(a, b, alen));
    free(a);
    free(b);
    return same;
}
