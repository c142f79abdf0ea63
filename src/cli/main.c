/*
 * main.c - `sluice`, the command-line tool: dispatch to a subcommand.
 *
 * Every subcommand is one row of commands[]: its name, its handler (which receives argv
 * starting at the command name and the connection options, and returns the process exit code)
 * and a one-line help shown by `sluice --help`. Adding a command is adding a row.
 *
 * Connection options (-h HOST, -p PORT, -a PASSWORD, --json, --timeout MS; see remote.h) may
 * come before the command; the remote commands also accept them among their arguments.
 * `sluice -h` alone (nothing after it) still means help.
 */
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include "remote.h"
#include "replay.h"
#include "sluice/version.h"

#define EXIT_USAGE 2

struct command {
    const char *name; /* as typed after `sluice` */
    /* argv[0] is the name; returns the exit code */
    int (*handler)(int argc, char **argv, const struct remote_opts *g);
    const char *help; /* one line for `sluice --help` */
};

static int replay_command(int argc, char **argv, const struct remote_opts *g)
{
    (void)g; /* offline: no server */
    return replay_main(argc, argv);
}

static const struct command commands[] = {
    {"replay", replay_command, "replay a traffic log against a rule; show what it would reject"},
    {"check", remote_check_main, "ask the server whether a request for a key may go through"},
    {"settle", remote_settle_main, "settle a reservation with its actual cost (SL.SETTLE)"},
    {"acquire", remote_acquire_main, "take units of an in-flight rule as a hold; print its id"},
    {"release", remote_release_main, "give a hold's units back at once (SL.RELEASE)"},
    {"rules", remote_rules_main, "import, export, list, get, set or delete the server's rules"},
    {"overrides", remote_overrides_main, "set, get or delete a key's override of a rule"},
    {"info", remote_info_main, "print the server's INFO"},
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
    fputs("usage: sluice COMMAND [OPTIONS] [ARGS]\n"
          "       sluice [CONNECTION OPTIONS] COMMAND [ARGS]\n"
          "       sluice help COMMAND | --help | --version\n"
          "\n"
          "Commands:\n",
          out);
    for (size_t i = 0; i < NCOMMANDS; i++) {
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].help);
    }
    fputs("\n", out);
    fputs(remote_options_usage(), out);
    fputs("\nRun 'sluice COMMAND --help' for a command's options.\n", out);
}

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++) {
        if (strcmp(commands[i].name, name) == 0) {
            return &commands[i];
        }
    }
    return NULL;
}

/* An unknown command or option: the error and a hint, not the whole help. */
static int unknown_command(const char *name)
{
    fprintf(stderr, "sluice: unknown %s '%s'\nTry 'sluice --help' for more information.\n",
            name[0] == '-' ? "option" : "command", name);
    return EXIT_USAGE;
}

/* The password when -a gives none: $SLUICE_PASSWORD (the tool's own name, kept for the scripts
 * that use it), else $SLUICE_REQUIREPASS (the name sluiced reads its password from). */
static const char *env_password(void)
{
    const char *own = getenv("SLUICE_PASSWORD");
    return own != NULL && own[0] != '\0' ? own : getenv("SLUICE_REQUIREPASS");
}

int main(int argc, char **argv)
{
    struct remote_opts g;
    remote_opts_init(&g, env_password());
    int i = 1;
    while (i < argc && argv[i][0] == '-' && !(strcmp(argv[i], "-h") == 0 && i + 1 == argc)) {
        char err[REMOTE_ERR_MAX];
        int used = remote_global_option(&g, argc, argv, i, err, sizeof err);
        if (used < 0) {
            fprintf(stderr, "sluice: %s\nTry 'sluice --help' for more information.\n", err);
            return EXIT_USAGE;
        }
        if (used == 0)
            break; /* --help, --version, or an unknown option: handled below */
        i += used;
    }
    if (i >= argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *name = argv[i];
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        printf("sluice %s\n", SL_VERSION_STRING);
        return 0;
    }
    if (strcmp(name, "help") == 0 && i + 1 < argc) {
        const struct command *cmd = find_command(argv[i + 1]);
        char help_flag[] = "--help";
        char *help_argv[] = {argv[i + 1], help_flag, NULL};
        return cmd != NULL ? cmd->handler(2, help_argv, &g) : unknown_command(argv[i + 1]);
    }
    if (strcmp(name, "help") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    const struct command *cmd = find_command(name);
    return cmd != NULL ? cmd->handler(argc - i, argv + i, &g) : unknown_command(name);
}
