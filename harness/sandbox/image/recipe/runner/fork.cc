// fork.node: fork(2) for a warm Jest host (jest-host.js, the zygote of runner.js). A new host is a
// copy of one that has loaded Jest and run the template, so it starts warm without paying for
// the load again (docs/sandbox.md#forked-hosts). Node has no fork of its own: a process made by
// child_process starts from nothing.
#include <condition_variable>
#include <errno.h>
#include <fcntl.h>
#include <mutex>
#include <node.h>
#include <node_api.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>
#include <v8-platform.h>

static napi_value ints(napi_env env, int n, const int* v) {
  napi_value r, x;
  napi_create_array_with_length(env, n, &r);
  for (int i = 0; i < n; i++) {
    napi_create_int32(env, v[i], &x);
    napi_set_element(env, r, i, x);
  }
  return r;
}

static napi_value fail(napi_env env, int err) {
  napi_throw_error(env, NULL, strerror(err));
  return NULL;
}

// V8 maps its heap MADV_DONTFORK, so a child would find those pages missing and crash on its first
// allocation: every mapping is made copyable first (a mapping that refuses is skipped).
static void all_copied_on_fork(void) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    unsigned long a, b;
    if (sscanf(line, "%lx-%lx", &a, &b) == 2) madvise((void*)a, b - a, MADV_DOFORK);
  }
  fclose(f);
}

// Node's worker threads wait for V8's background tasks on a condition variable; a child has none
// of those threads, but the variable still counts them as waiters, and the child's first signal on
// it (V8 posts a job at every full GC, whatever its flags) would wait for them forever. So at the
// fork every worker thread is held busy in a task of ours, off that variable, and let go after.
struct Gate {
  std::mutex m;
  std::condition_variable cv;
  int busy = 0;
  bool open = false;
};

class Hold : public v8::Task {
 public:
  explicit Hold(Gate* g) : g_(g) {}
  void Run() override {
    std::unique_lock<std::mutex> l(g_->m);
    g_->busy++;
    g_->cv.notify_all();
    g_->cv.wait(l, [this] { return g_->open; });
    if (--g_->busy == 0) g_->cv.notify_all();
  }

 private:
  Gate* g_;
};

static void nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

// fork(channelFd) -> [pid, channel, output] in the parent, [0, -1, -1] in the child. The child
// leads a session of its own, talks to its parent's parent over a new socket put in place of the
// IPC channel's descriptor (Node's channel object reads it unchanged), and writes stdout and
// stderr to a new pipe; the parent gets the other ends, to hand on. Both ends close on exec.
static napi_value Fork(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t chan = -1;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || napi_get_value_int32(env, argv[0], &chan) != napi_ok || chan < 3)
    return fail(env, EINVAL);
  int ipc[2], out[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ipc)) return fail(env, errno);
  if (pipe2(out, O_CLOEXEC)) {
    int e = errno;
    close(ipc[0]);
    close(ipc[1]);
    return fail(env, e);
  }
  node::MultiIsolatePlatform* platform = node::GetMultiIsolatePlatform(
      node::GetCurrentEnvironment(v8::Isolate::GetCurrent()->GetCurrentContext()));
  int workers = platform ? platform->NumberOfWorkerThreads() : 0;
  // Never freed (a late worker may still come through it): some bytes per fork, in the zygote.
  Gate* gate = new Gate();
  for (int i = 0; i < workers; i++) platform->CallOnWorkerThread(std::make_unique<Hold>(gate));
  bool held;
  {
    std::unique_lock<std::mutex> l(gate->m);
    // Node counts its delayed-task thread among the workers (it runs no task of the queue).
    held = gate->cv.wait_for(l, std::chrono::seconds(2), [&] { return gate->busy >= workers - 1; });
    if (held) gate->cv.wait_for(l, std::chrono::milliseconds(20), [&] { return gate->busy == workers; });
  }
  pid_t pid = -1;
  int forkErr = EAGAIN;  // a worker thread stayed busy with V8's own work: no fork this time
  if (held) {
    all_copied_on_fork();
    pid = fork();
    forkErr = errno;
  }
  if (pid != 0) {
    std::unique_lock<std::mutex> l(gate->m);
    gate->open = true;
    gate->cv.notify_all();
  }
  if (pid < 0) {
    close(ipc[0]);
    close(ipc[1]);
    close(out[0]);
    close(out[1]);
    return fail(env, forkErr);
  }
  if (pid == 0) {
    setsid();
    dup2(ipc[1], chan);
    dup2(out[1], 1);
    dup2(out[1], 2);
    fcntl(chan, F_SETFD, FD_CLOEXEC);
    nonblocking(chan);
    // stdout and stderr stay blocking: the zygote's process.stdout writes synchronously (it was
    // made for /dev/null), and a full pipe must stop the writer until the runner has read it.
    close(ipc[0]);
    close(ipc[1]);
    close(out[0]);
    close(out[1]);
    uv_loop_fork(uv_default_loop()); // a new epoll set; the parent's stays the parent's
    int r[3] = {0, -1, -1};
    return ints(env, 3, r);
  }
  close(ipc[1]);
  close(out[1]);
  int r[3] = {pid, ipc[0], out[0]};
  return ints(env, 3, r);
}

// reap(pid) -> null while it runs, else [pid, exit code or -1, signal or 0].
static napi_value Reap(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], none;
  int32_t pid = 0;
  int st = 0;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  napi_get_null(env, &none);
  if (argc < 1 || napi_get_value_int32(env, argv[0], &pid) != napi_ok || pid <= 0) return none;
  if (waitpid(pid, &st, WNOHANG) != pid) return none;
  int r[3] = {pid, WIFEXITED(st) ? WEXITSTATUS(st) : -1, WIFSIGNALED(st) ? WTERMSIG(st) : 0};
  return ints(env, 3, r);
}

// exit(code): a forked child ends here, not through Node's teardown, which would wait for the
// parent's worker threads (a child has none of them).
static napi_value Exit(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t code = 0;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc > 0) napi_get_value_int32(env, argv[0], &code);
  _exit(code & 0xff);
  return NULL;
}

NAPI_MODULE_INIT() {
  napi_value f;
  napi_create_function(env, "fork", NAPI_AUTO_LENGTH, Fork, NULL, &f);
  napi_set_named_property(env, exports, "fork", f);
  napi_create_function(env, "reap", NAPI_AUTO_LENGTH, Reap, NULL, &f);
  napi_set_named_property(env, exports, "reap", f);
  napi_create_function(env, "exit", NAPI_AUTO_LENGTH, Exit, NULL, &f);
  napi_set_named_property(env, exports, "exit", f);
  return exports;
}
