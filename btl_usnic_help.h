/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The BTL's own renderer of its show_help topics (btl_usnic_help.c).
 */
#ifndef OPAL_BTL_USNIC_HELP_H
#define OPAL_BTL_USNIC_HELP_H

#include <stdarg.h>

#define OPAL_BTL_USNIC_HELP_FILE "help-mpi-btl-usnic.txt"

/* Look for the help file in |dir| too (searched in the order added) */
void opal_btl_usnic_help_add_dir(const char *dir);
void opal_btl_usnic_help_clear_dirs(void);

/* The text of "[topic]" in the help file at |path| (malloc'ed; comment
 * lines left out), or NULL if the file or the topic is missing */
char *opal_btl_usnic_help_topic(const char *path, const char *topic);

/* |topic| rendered with the arguments |ap| and framed like show_help's
 * messages (malloc'ed), or NULL if no directory added has it */
char *opal_btl_usnic_help_vrender(const char *topic, va_list ap);

#endif /* OPAL_BTL_USNIC_HELP_H */
