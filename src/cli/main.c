/*
 * main.c - `sluice`, the command-line tool: dispatch to a subcommand.
 *
 * Every subcommand is one row of commands[]: its name, its handler (which receives argv
 * starting at the command name and returns the process exit code) and a one-line help shown
 * by `sluice --help`. Adding a command is adding a row (planned: check, rules, overrides,
 * info).
 */
#include <stdio.h>
#include <string.h>

#include "replay.h"
#include "sluice/version.h"

#define EXIT_USAGE 2

struct command {
    const char *name;                      /* as typed after `sluice` */
    int (*handler)(int argc, char **argv); /* argv[0] is the name; returns the exit code */
    const char *help;                      /* one line for `sluice --help` */
};

static const struct command commands[] = {
    {"replay", replay_main, "replay a traffic log against a rule; show what it would reject"},
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
    fputs("usage: sluice COMMAND [OPTIONS] [ARGS]\n"
          "       sluice help COMMAND | --help | --version\n"
          "\n"
          "Commands:\n",
          out);
    for (size_t i = 0; i < NCOMMANDS; i++) {
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].help);
    }
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

static int unknown_command(const char *name)
{
    fprintf(stderr, "sluice: unknown command '%s'\n\n", name);
    usage(stderr);
    return EXIT_USAGE;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        printf("sluice %s\n", SL_VERSION_STRING);
        return 0;
    }
    if (strcmp(name, "help") == 0 && argc > 2) {
        const struct command *cmd = find_command(argv[2]);
        char help_flag[] = "--help";
        char *help_argv[] = {argv[2], help_flag, NULL};
        return cmd != NULL ? cmd->handler(2, help_argv) : unknown_command(argv[2]);
    }
    if (strcmp(name, "help") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    const struct command *cmd = find_command(name);
    return cmd != NULL ? cmd->handler(argc - 1, argv + 1) : unknown_command(name);
}
