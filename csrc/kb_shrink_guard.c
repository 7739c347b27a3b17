/* See kb_shrink_guard.h.  The handler reads the registrations without a lock (a signal handler
 * may not take one): each is two atomics, set hi-first and cleared lo-first, so a registration it
 * sees whole is one that is live. */
#define _GNU_SOURCE
#include "kb_shrink_guard.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define KB_SHRINK_GUARDS 1024

typedef struct {
    _Atomic uintptr_t lo, hi; /* [lo, hi): the mapping, whole pages; lo 0 = free */
    atomic_int hit;
} kb_guarded;

static kb_guarded guarded[KB_SHRINK_GUARDS];
static struct sigaction previous;
static uintptr_t page_size;
static int installed; /* under lock */
static atomic_flag lock = ATOMIC_FLAG_INIT; /* registrations are rare and short: a spin lock */

static void take(void) {
    while (atomic_flag_test_and_set(&lock))
        ;
}

static void give(void) {
    atomic_flag_clear(&lock);
}

static void pass_on(int sig, siginfo_t *info, void *context) {
    if (previous.sa_flags & SA_SIGINFO) {
        if (previous.sa_sigaction != NULL) {
            previous.sa_sigaction(sig, info, context);
            return;
        }
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    /* the default action, as without this handler: a fault happens again on return */
    signal(sig, SIG_DFL);
    if (info->si_code <= 0)
        raise(sig);
}

static void on_sigbus(int sig, siginfo_t *info, void *context) {
    uintptr_t at = (uintptr_t) info->si_addr;
    if (info->si_code > 0) { /* a fault, not a signal sent */
        for (int i = 0; i < KB_SHRINK_GUARDS; i++) {
            uintptr_t lo = atomic_load(&guarded[i].lo);
            if (lo == 0 || at < lo)
                continue;
            uintptr_t hi = atomic_load(&guarded[i].hi);
            if (at >= hi)
                continue;
            uintptr_t from = at - at % page_size;
            /* zero pages over what the file lost, to the mapping's end: the read goes on */
            if (mmap((void *) from, hi - from, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
                MAP_FAILED)
                break;
            atomic_store(&guarded[i].hit, 1);
            return;
        }
    }
    pass_on(sig, info, context);
}

static int install(void) {
    if (installed)
        return 0;
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0)
        return -1;
    page_size = (uintptr_t) page;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &previous) != 0)
        return -1;
    installed = 1;
    return 0;
}

int kb_shrink_guard_add(const void *map, size_t len) {
    if (map == NULL || len == 0)
        return -1;
    int handle = -1;
    take();
    if (install() == 0) {
        for (int i = 0; i < KB_SHRINK_GUARDS; i++) {
            if (atomic_load(&guarded[i].lo) == 0) {
                uintptr_t lo = (uintptr_t) map;
                atomic_store(&guarded[i].hit, 0);
                atomic_store(&guarded[i].hi, lo + len + (page_size - len % page_size) % page_size);
                atomic_store(&guarded[i].lo, lo);
                handle = i;
                break;
            }
        }
    }
    give();
    return handle;
}

int kb_shrink_guard_hit(int handle) {
    if (handle < 0 || handle >= KB_SHRINK_GUARDS)
        return 0;
    return atomic_load(&guarded[handle].hit);
}

int kb_shrink_guard_remove(int handle) {
    if (handle < 0 || handle >= KB_SHRINK_GUARDS)
        return 0;
    int hit = atomic_load(&guarded[handle].hit);
    take();
    atomic_store(&guarded[handle].lo, 0);
    atomic_store(&guarded[handle].hi, 0);
    give();
    return hit;
}
