/* as_user.h: for escape tests that must hold for an ordinary user too: run
 * as root, the test binary runs itself again as uid HX_TEST_UID (default
 * 1000), where the sandbox takes a user namespace instead of dropping to
 * nobody; its "ok"/"FAIL" lines count like the first pass's. */
#ifndef HX_TEST_AS_USER_H
#define HX_TEST_AS_USER_H

#include <grp.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

/* Whether this process should run the second pass (root, first pass). */
static int test_wants_user_pass(void)
{
    return geteuid() == 0 && !getenv("HX_TEST_AS_USER");
}

/* Runs self (no arguments) as the ordinary user and expects it to pass. */
__attribute__((unused)) static void test_again_as_user(const char *self)
{
    const char *v = getenv("HX_TEST_UID");
    uid_t uid = (uid_t)(v ? atoi(v) : 1000);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgroups(0, NULL) || setgid(uid) || setuid(uid)) _exit(77);
        setenv("HX_TEST_AS_USER", "1", 1);
        printf("# again as uid %u\n", (unsigned)uid);
        fflush(stdout);
        execl(self, self, (char *)NULL);
        _exit(78);
    }
    int st;
    waitpid(pid, &st, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77) SKIP("cannot become uid %u", (unsigned)uid);
    EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

#endif
