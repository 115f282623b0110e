/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 *
 * The BTL's own renderer of its help topics (btl_usnic_help.c): topics
 * found with comments left out and the next topic not taken, missing
 * files and topics, rendering with arguments in show_help's frame, and
 * every topic of the real help-mpi-btl-usnic.txt found.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "btl_usnic_help.h"
#include "unit.h"

#define FRAME "--------------------------------------------------------------------------\n"

/* A temporary directory holding a help file with |text| */
static char *make_help_dir(const char *text)
{
    char tmpl[] = "/tmp/usnic-help-XXXXXX";
    char *dir = mkdtemp(tmpl);
    if (NULL == dir) {
        return NULL;
    }
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, OPAL_BTL_USNIC_HELP_FILE);
    FILE *f = fopen(path, "w");
    if (NULL == f) {
        return NULL;
    }
    fputs(text, f);
    fclose(f);
    return strdup(dir);
}

static void remove_help_dir(char *dir)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, OPAL_BTL_USNIC_HELP_FILE);
    unlink(path);
    rmdir(dir);
    free(dir);
}

static const char *sample = "# -*- text -*-\n"
                            "# a comment\n"
                            "[first]\n"
                            "Host %s has %d of them.\n"
                            "# a comment inside a topic\n"
                            "\n"
                            "Second line.\n"
                            "[second topic]\n"
                            "Only this.\n"
                            "[empty]\n"
                            "[first but longer]\n"
                            "Not the first.\n";

static void test_help_topic_text(void)
{
    char *dir = make_help_dir(sample);
    REQUIRE(NULL != dir);
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, OPAL_BTL_USNIC_HELP_FILE);
    char *t = opal_btl_usnic_help_topic(path, "first");
    REQUIRE(NULL != t);
    CHECK_STR(t, "Host %s has %d of them.\n\nSecond line.\n");
    free(t);
    t = opal_btl_usnic_help_topic(path, "second topic");
    REQUIRE(NULL != t);
    CHECK_STR(t, "Only this.\n");
    free(t);
    t = opal_btl_usnic_help_topic(path, "empty");
    REQUIRE(NULL != t);
    CHECK_STR(t, "");
    free(t);
    CHECK(NULL == opal_btl_usnic_help_topic(path, "absent"));
    CHECK(NULL == opal_btl_usnic_help_topic(path, "firs"));
    CHECK(NULL == opal_btl_usnic_help_topic("/nonexistent/help.txt", "first"));
    remove_help_dir(dir);
}

static char *render(const char *topic, ...)
{
    va_list ap;
    va_start(ap, topic);
    char *msg = opal_btl_usnic_help_vrender(topic, ap);
    va_end(ap);
    return msg;
}

static void test_help_render_framed(void)
{
    char *empty = make_help_dir("[other]\nx\n");
    char *dir = make_help_dir(sample);
    REQUIRE(NULL != dir && NULL != empty);
    CHECK(NULL == render("first", "h", 1)); /* no directory yet */
    opal_btl_usnic_help_add_dir(empty);     /* searched first, lacks the topic */
    opal_btl_usnic_help_add_dir(dir);
    opal_btl_usnic_help_add_dir(dir); /* once is enough */
    char *msg = render("first", "node7", 3);
    REQUIRE(NULL != msg);
    CHECK_STR(msg, FRAME "Host node7 has 3 of them.\n\nSecond line.\n" FRAME);
    free(msg);
    CHECK(NULL == render("absent"));
    opal_btl_usnic_help_clear_dirs();
    CHECK(NULL == render("first", "h", 1));
    remove_help_dir(dir);
    remove_help_dir(empty);
}

/* Every "[topic]" of the real file is found again by its name */
static void test_help_real_file_topics(void)
{
    char path[512];
    const char *src = __FILE__; /* test/unit/test_help.c, relative to the top */
    const char *cut = strstr(src, "test/unit/test_help.c");
    REQUIRE(NULL != cut);
    snprintf(path, sizeof(path), "%.*s%s", (int) (cut - src), src, OPAL_BTL_USNIC_HELP_FILE);
    FILE *f = fopen(path, "r");
    REQUIRE(NULL != f);
    char line[512];
    int topics = 0;
    while (NULL != fgets(line, sizeof(line), f)) {
        size_t n = strcspn(line, "\n");
        if ('[' != line[0] || n < 3 || ']' != line[n - 1]) {
            continue;
        }
        line[n - 1] = '\0';
        char *text = opal_btl_usnic_help_topic(path, line + 1);
        if (!CHECK(NULL != text && '\0' != text[0])) {
            fprintf(stderr, "  topic [%s]\n", line + 1);
        }
        free(text);
        ++topics;
    }
    fclose(f);
    CHECK_GT(topics, 10);
}

/* show_help renders our topics only if what it finds first (Open MPI's
 * data directory) is absent or our text */
static void test_help_same_text(void)
{
    char *a = make_help_dir("[t]\nsame\n"), *b = make_help_dir("[t]\nsame\n"), *c = make_help_dir("[t]\nolder\n");
    if (!CHECK_PTR_NE(a, NULL) || !CHECK_PTR_NE(b, NULL) || !CHECK_PTR_NE(c, NULL)) {
        return;
    }
    char pa[256], pb[256], pc[256];
    snprintf(pa, sizeof(pa), "%s/%s", a, OPAL_BTL_USNIC_HELP_FILE);
    snprintf(pb, sizeof(pb), "%s/%s", b, OPAL_BTL_USNIC_HELP_FILE);
    snprintf(pc, sizeof(pc), "%s/%s", c, OPAL_BTL_USNIC_HELP_FILE);
    CHECK_EQ(opal_btl_usnic_help_same_text(pa, pb), true);
    CHECK_EQ(opal_btl_usnic_help_same_text(pc, pb), false); /* an older copy in front of ours */
    CHECK_EQ(opal_btl_usnic_help_same_text("/nonexistent/x.txt", pb), true);
    CHECK_EQ(opal_btl_usnic_help_same_text(pc, "/nonexistent/x.txt"), true);
    remove_help_dir(a);
    remove_help_dir(b);
    remove_help_dir(c);
}

UNIT_MAIN(UNIT_TEST(test_help_topic_text), UNIT_TEST(test_help_render_framed), UNIT_TEST(test_help_real_file_topics),
          UNIT_TEST(test_help_same_text))
