/* cli_session.h: internal header of the command line's assistant session:
 * the options `hearth ask`, `chat` and `serve` share, and everything a run
 * needs (configuration, tools, policy, memory, model, source), opened once. */
#ifndef HX_CLI_SESSION_H
#define HX_CLI_SESSION_H

#include "agent/agent.h"
#include "cli/cli.h"

typedef struct cli_ask_opts {
    const char *model, *config, *style, *choice, *tools;
    const char *answer; /* --answer: model, results or auto (NULL) */
    int yes, no, allow_tainted, json, n_ctx, n_threads, no_memory;
    const char *adapters[HX_ADAPTER_MAX]; /* --adapter FILE[:SCALE] */
    int n_adapters, no_adapter;
    hx_planner_params pp;
    hx_source_engine_params ep; /* ep.cancelled: the caller's (Ctrl-C) */
    const char *text; /* ask: the request */
} cli_ask_opts;

/* Parses the assistant's options of verb argv[0] ("ask" takes the request
 * TEXT; other verbs no argument) into o. HX_EXIT_OK, or the exit code
 * after saying what is wrong on stderr. */
int hx_cli_ask_parse(int argc, char **argv, cli_ask_opts *o);

typedef struct cli_session {
    hx_config *cfg;
    hx_tools *reg;
    hx_extools *x;
    hx_memory *mem;
    struct hx_policy *policy;
    struct hx_audit *audit;
    struct hx_consent *consent;
    hx_model *model;
    hx_source src;
    hx_planner *pl;
    hx_tool_spec *specs;       /* the offered tools the grammar can use */
    int n_specs;
    hx_source_engine_params ep; /* src's, after the style, the governor
                                   and the adapters, without the loop
                                   (src's alone): more sources on the same
                                   model are made with it */
    hx_planner_params pp;       /* pl's */
    const char *tools;    /* the tool filter: --tools, or the governor's cut */
    hx_loop *loop;        /* the closed loop (NULL: the governor is off) */
    int loop_seen;        /* its decisions reported so far */
    int turn_from;        /* the one in force when the request began */
    int tools_fixed;      /* --tools, or the small tier's cut: kept */
    int small_tier;       /* ask's request is the small tier's: its model
                             and cut stay */
    int no_model;         /* ask's request is the tool tier's: no model
                             loaded, src empty */
    const cli_ask_opts *opts; /* the options it was opened with (borrowed) */
    char full_path[4096]; /* the model asked for, which the small one stands
                             in for ("" none) */
    int small_chosen;     /* the governor's small model was chosen last */
    char tool_cut[512];
    char model_name[256];
    hx_adapter *ads[HX_ADAPTER_MAX]; /* attached to the source's context */
    float ascale[HX_ADAPTER_MAX];
    int n_ads;
} cli_session;

/* Opens the session of o: Hearth confines itself from the network first
 * (hx_sandbox_confine_self_no_network), then loads the configuration (checked), the
 * tools, memory, policy and audit log, the model and its source, and a
 * planner whose consent asks on the terminal when stdin and stderr are
 * one (and not --json). o is borrowed: it must outlive the session. *s
 * is the caller's to close with hx_cli_session_close, also on failure. */
int hx_cli_session_open(cli_session *s, const cli_ask_opts *o, hx_err *err);
void hx_cli_session_close(cli_session *s);
/* Before each request of s (text): the device is re-read; when the
 * loop's choice of the small model (config governor.small_model)
 * changed, that model or the one asked for is loaded in place of the
 * other (the conversation carries over; one that cannot be loaded keeps
 * the one there, said on stderr); and while the loop trims the prompt
 * (the critical level, or turns over the latency targets) the request's
 * own tool cut (hx_agent_tools_for_request) is offered, else every tool
 * (said on stderr when it changes); --tools and the small tier's cut
 * stay. HX_OK, or HX_ERR_NOMEM. */
int hx_cli_session_request(cli_session *s, const char *text, hx_err *err);
/* Decodes ahead the start of the next request's prompt (system text,
 * tools, conversation, clock: hx_planner_prepare) while the caller waits
 * for the user; not where the loop picks the tools by the request (its
 * prompt is not known) or no model runs. 1 when prepared. */
int hx_cli_session_prepare(cli_session *s);
/* The tool tier (config governor.tool_tier): 1 when it takes text, the
 * call in *tool and *args (caller frees) as hx_agent_tool_tier gives
 * them and among the tools s offers; else 0, *args NULL. */
int hx_cli_session_tool_tier(const cli_session *s, const char *text, const char **tool,
                             cJSON **args);
/* After the request: the loop's decisions it ran under (the one in force
 * when it began, then those made during it) go to its episode in memory
 * (hx_memory_episode_set_governor; a failure is logged). */
void hx_cli_session_record(cli_session *s, int64_t episode);

#endif /* HX_CLI_SESSION_H */
