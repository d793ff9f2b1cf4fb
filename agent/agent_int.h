/* agent_int.h: internal header of the agent module: glue between the
 * modules the agent ties together (memory tools, ...). Not public. */
#ifndef HX_AGENT_INT_H
#define HX_AGENT_INT_H

#include "memory/memory.h"
#include "tools/tools.h"

/* Registers memory.remember, memory.forget and memory.search into reg,
 * acting on mem (borrowed: it must outlive the registry's use of them).
 * Fails, leaving the tools registered so far, if a name is taken. */
int hx_agent_register_memory_tools(hx_tools *reg, hx_memory *mem, hx_err *err);

#endif /* HX_AGENT_INT_H */
