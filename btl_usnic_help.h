/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The BTL's own renderer of its show_help topics (btl_usnic_help.c).
 */
#ifndef OPAL_BTL_USNIC_HELP_H
#define OPAL_BTL_USNIC_HELP_H

#include <stdarg.h>
#include <stdbool.h>

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

/* Does Open MPI's show_help render our topics from our file?  Set when
 * the component registers (add_help_dirs); false on 6.0 and later, and
 * where a different help-mpi-btl-usnic.txt in Open MPI's data directory,
 * which show_help searches first, would shadow the one beside the plugin
 * (an older install): opal_btl_usnic_show_help then renders its own. */
extern bool opal_btl_usnic_help_via_runtime;

/* Is the file at |first| (the one show_help finds first) absent, or the
 * same text as |ours|, or |ours| absent (then |first| is all there is)? */
bool opal_btl_usnic_help_same_text(const char *first, const char *ours);

#endif /* OPAL_BTL_USNIC_HELP_H */
