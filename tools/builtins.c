/* builtins.c: registers the built-in tool groups (calendar.*, mail.*,
 * files.*): one line per group; then opens the folders they work in. */
#include "tools/mail_int.h"
#include "tools/tools_int.h"

int hx_tools_register_builtins(hx_tools *reg, hx_err *err)
{
    static int (*const groups[])(hx_tools *, hx_err *) = {
        hx_cal_register,
        hx_mail_register_tools,
        hx_files_register_tools,
    };
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        int rc = groups[i](reg, err);
        if (rc) return rc;
    }
    hx_tools_open_roots(reg);
    return HX_OK;
}
