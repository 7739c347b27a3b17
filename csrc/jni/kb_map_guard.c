#define _GNU_SOURCE /* sigaction, siginfo_t, sigjmp_buf under -std=c11 */
#include "kb_map_guard.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>

/* this thread's innermost guard; initial-exec: read from a signal handler, where a lazily
 * allocated thread-local (a dlopen'ed library's default) could call malloc */
static _Thread_local kb_map_guard *current __attribute__((tls_model("initial-exec")));
static struct sigaction previous;             /* the handler before ours (the JVM's) */
static int installed;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void on_sigbus(int sig, siginfo_t *info, void *context)
{
    kb_map_guard *g = current;
    const uint8_t *at = info ? (const uint8_t *)info->si_addr : NULL;
    if (g != NULL && at >= g->lo && at < g->hi) {
        current = g->outer;
        siglongjmp(g->jump, 1);
    }
    if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(sig, info, context);
    } else if (previous.sa_handler == SIG_IGN) {
        return;
    } else if (previous.sa_handler != SIG_DFL) {
        previous.sa_handler(sig);
    } else {  /* no handler before: die of it as the process would have */
        signal(sig, SIG_DFL);
        raise(sig);
    }
}

static void install(void)
{
    struct sigaction ours;
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = on_sigbus;
    sigemptyset(&ours.sa_mask);
    ours.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    installed = sigaction(SIGBUS, &ours, &previous) == 0;
}

int kb_map_guard_install(void)
{
    pthread_once(&once, install);
    return installed ? 0 : -1;
}

void kb_map_guard_begin(kb_map_guard *g, const void *map, size_t len)
{
    g->lo = map;
    g->hi = map ? (const uint8_t *)map + len : NULL;
    g->outer = current;
    current = g;
}

void kb_map_guard_end(kb_map_guard *g)
{
    if (current == g)
        current = g->outer;
}

kb_map_guard *kb_map_guard_suspend(void)
{
    kb_map_guard *saved = current;
    current = NULL;
    return saved;
}

void kb_map_guard_resume(kb_map_guard *saved)
{
    current = saved;
}
