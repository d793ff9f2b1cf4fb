/* main.c: the `hearth` command: finds the verb and runs it. Each verb lives
 * in cli/cmd_<group>.c and is listed in the table below. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const hx_verb verbs[] = {
    {"version", hx_cmd_version, "print the version"},
    {"memory", hx_cmd_memory, "list, search, show, forget, export memories"},
    {"generate", hx_cmd_generate, "stream a model's continuation of a prompt"},
    {"info", hx_cmd_info, "describe a GGUF model"},
    {"tokenize", hx_cmd_tokenize, "print the token ids of a text"},
    {"mkmodel", hx_cmd_mkmodel, "write a random-weight test model (dev tool)"},
    {"model", hx_cmd_model, "update a model file by a delta of changed tensors (diff, patch)"},
    {"quantize", hx_cmd_quantize, "quantize a GGUF model (presets, overrides, calibration)"},
    {"train", hx_cmd_train, "train a small model or a LoRA adapter on a text file (dev tool)"},
    {"lora", hx_cmd_lora, "list, show, switch or roll back LoRA adapters"},
    {"nightly", hx_cmd_nightly, "fine-tune a LoRA adapter on accepted episodes (when idle)"},
    {"datagen", hx_cmd_datagen, "generate agent trajectories or evaluation tasks (dev tool)"},
    {"vocab", hx_cmd_vocab, "train a byte-level BPE vocabulary (dev tool)"},
    {"tools", hx_cmd_tools, "list the tools, or call one with JSON arguments"},
    {"ask", hx_cmd_ask, "ask the assistant: plan, call tools, answer"},
    {"chat", hx_cmd_chat, "a session with the assistant, with history"},
    {"feedback", hx_cmd_feedback, "accept, correct or reject the last answer"},
    {"init", hx_cmd_init, "set up: your name, time zone, calendar, mail, files"},
    {"doctor", hx_cmd_doctor, "check the whole setup and say how to fix what is wrong"},
    {"serve", hx_cmd_serve, "the assistant for apps and a browser, on this device (HTTP)"},
};
#define N_VERBS (sizeof verbs / sizeof verbs[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: hearth <verb> [options]\n\n"
               "An on-device assistant and tool-calling runtime.\n\n"
               "verbs:\n");
    for (size_t i = 0; i < N_VERBS; i++)
        fprintf(f, "  %-12s %s\n", verbs[i].name, verbs[i].summary);
    fprintf(f, "\n'hearth <verb> --help' describes a verb.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return HX_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
        !strcmp(argv[1], "help")) {
        usage(stdout);
        return HX_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) return hx_cmd_version(1, argv + 1);
    for (size_t i = 0; i < N_VERBS; i++)
        if (!strcmp(argv[1], verbs[i].name))
            return verbs[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "hearth: unknown verb '%s'\n\n", argv[1]);
    usage(stderr);
    return HX_EXIT_USAGE;
}
