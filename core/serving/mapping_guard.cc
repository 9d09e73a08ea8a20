#include "core/serving/mapping_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace grove::serving {
namespace {

// One guarded mapping. `begin` 0: free. Written under g_slots_mu (Add, Remove); read by the
// handler without a lock (atomics only).
struct Slot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> faulted{false};
};

Slot g_slots[MappingGuard::kCapacity];
// Slots [0, g_used) may be in use: the handler scans no further.
std::atomic<int> g_used{0};
std::mutex g_slots_mu;
uintptr_t g_page = 4096;
struct sigaction g_previous;

// Restores the disposition found at install time for a SIGBUS that is not ours: returning from
// the handler then re-runs the faulting instruction, which raises SIGBUS again under it.
void Chain(int signo, siginfo_t* info, void* context) {
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(signo, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN &&
      g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(signo);
    return;
  }
  // SIG_IGN cannot ignore a fault (the instruction would fault forever): both mean the default.
  struct sigaction fallback = {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(SIGBUS, &fallback, nullptr);
}

void OnSigbus(int signo, siginfo_t* info, void* context) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
  const int used = g_used.load(std::memory_order_acquire);
  for (int i = 0; i < used; ++i) {
    Slot& slot = g_slots[i];
    const uintptr_t begin = slot.begin.load(std::memory_order_acquire);
    const uintptr_t end = slot.end.load(std::memory_order_acquire);
    if (begin == 0 || address < begin || address >= end) continue;
    const uintptr_t page = address & ~(g_page - 1);
    void* zero = mmap(reinterpret_cast<void*>(page), end - page, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (zero == MAP_FAILED) break;  // cannot absorb it: die as without the guard
    slot.faulted.store(true, std::memory_order_release);
    return;
  }
  Chain(signo, info, context);
}

void Install() {
  g_page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  struct sigaction action = {};
  action.sa_sigaction = OnSigbus;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&action.sa_mask);
  sigaction(SIGBUS, &action, &g_previous);
}

}  // namespace

int MappingGuard::Add(void* begin, size_t bytes) {
  static std::once_flag installed;
  std::call_once(installed, Install);
  const uintptr_t b = reinterpret_cast<uintptr_t>(begin);
  const uintptr_t e = (b + bytes + g_page - 1) & ~(g_page - 1);  // the mapping's last page whole
  std::lock_guard<std::mutex> lock(g_slots_mu);
  const int used = g_used.load(std::memory_order_relaxed);
  int slot = -1;
  for (int i = 0; i < used && slot < 0; ++i) {
    if (g_slots[i].begin.load(std::memory_order_relaxed) == 0) slot = i;
  }
  if (slot < 0) {
    if (used == kCapacity) return -1;
    slot = used;
  }
  g_slots[slot].faulted.store(false, std::memory_order_relaxed);
  g_slots[slot].end.store(e, std::memory_order_relaxed);
  g_slots[slot].begin.store(b, std::memory_order_release);
  if (slot == used) g_used.store(used + 1, std::memory_order_release);
  return slot;
}

void MappingGuard::Remove(int slot) {
  if (slot < 0 || slot >= kCapacity) return;
  std::lock_guard<std::mutex> lock(g_slots_mu);
  g_slots[slot].begin.store(0, std::memory_order_release);
  g_slots[slot].end.store(0, std::memory_order_release);
}

bool MappingGuard::Faulted(int slot) {
  if (slot < 0 || slot >= kCapacity) return false;
  return g_slots[slot].faulted.load(std::memory_order_acquire);
}

}  // namespace grove::serving
