#include "server/kserve/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "core/common/log.h"
#include "core/io/file.h"
#include "httplib.h"
#include "openssl/err.h"
#include "openssl/ssl.h"
#include "openssl/x509.h"
#include "server/call.h"
#include "server/convert.h"
#include "server/http/http_stream.h"
#include "server/kserve/kserve_convert.h"
#include "server/kserve/kserve_ops.h"
#include "server/kserve/kserve_rest.h"

namespace grove::server {
namespace {

// When a connection waits for a worker, a connection that has sent nothing of a request, or only
// part of its head, for this long may be closed for it (a kept-alive one that finished its last
// request may be closed at once): long enough that a client whose request is on its way is not
// cut, short enough that slow clients cannot keep new ones out.
constexpr absl::Duration kEvictableAfter = absl::Seconds(1);
// How often connections waiting for a worker look for one to close when none could be closed yet.
constexpr absl::Duration kEvictionInterval = absl::Milliseconds(100);
// How long connections wait for a worker before one is closed for them: longer than a worker takes
// to finish a connection that was closed (a client reconnecting), far shorter than a client waits.
constexpr absl::Duration kStarvedFor = absl::Milliseconds(50);
// After an answer that closes a connection whose request was not read whole, the rest is read
// and dropped for at most this long, and at most the largest body a request may have and a head
// (nothing of it is kept), so that a client that sends its whole request before it reads reads
// the answer instead of a reset connection.
constexpr absl::Duration kLingerTime = absl::Seconds(2);
// At the grace deadline, workers whose calls were cancelled have this long to answer them (503)
// before their connections are shut down too.
constexpr absl::Duration kCancelledAnswerTime = absl::Milliseconds(250);
// The kernel's queue of connections not yet accepted (cpp-httplib's own is 5).
constexpr int kListenBacklog = 1024;

}  // namespace

enum class Phase { kIdle, kHead, kBusy };

// One accepted connection, owned by the worker serving it (on its stack); the table points to it
// while it is open.
struct Connection {
  Connection(int fd, absl::Time accepted) : fd(fd), accepted(accepted), since(accepted) {}
  const int fd;
  const absl::Time accepted;
  // Guarded by the table's mutex.
  Phase phase = Phase::kIdle;
  // When it entered `phase`; for its first request, when it was accepted (the time it waited for
  // a worker counts: a slow client does not start afresh there).
  absl::Time since;
  bool served = false;               // it answered a request (an idle one is kept alive)
  bool closing = false;              // evicted or cut: its socket is shut down
  std::shared_ptr<serving::CallState> call;  // the inference it waits for
};

// The open connections, what each is doing, and the server's stop state. Thread-safe.
class ConnectionTable {
 public:
  // False when the server is stopping (the connection is closed unserved).
  bool Add(Connection* c) {
    absl::MutexLock lock(&mu_);
    if (stopping_) return false;
    live_.insert(c);
    return true;
  }
  void Remove(Connection* c) {
    absl::MutexLock lock(&mu_);
    live_.erase(c);
  }
  // The connection waits for its next request. False: close it instead (stopping, evicted, or
  // kept alive while an accepted connection waits for a worker).
  bool EnterIdle(Connection* c) {
    absl::MutexLock lock(&mu_);
    if (c->closing || stopping_ || (c->served && waiting_.load() > 0)) return false;
    c->phase = Phase::kIdle;
    c->since = c->served ? absl::Now() : c->accepted;
    return true;
  }
  // It drops what its client still sends before it closes: no longer than a connection waits for
  // its worker (false: close at once), and it is the first to close for one.
  bool EnterLinger(Connection* c) {
    absl::MutexLock lock(&mu_);
    if (c->closing || stopping_ || waiting_.load() > 0) return false;
    c->phase = Phase::kIdle;
    c->served = true;
    c->since = absl::Now();
    return true;
  }
  // Its next request began (a first byte arrived). False when it was closed meanwhile.
  bool EnterHead(Connection* c) {
    absl::MutexLock lock(&mu_);
    if (c->closing) return false;
    c->phase = Phase::kHead;
    c->since = c->served ? absl::Now() : c->accepted;
    return true;
  }
  // Its request head arrived: it is being served until its answer is written.
  void EnterBusy(Connection* c) {
    absl::MutexLock lock(&mu_);
    c->phase = Phase::kBusy;
    c->since = absl::Now();
    c->served = true;
  }
  // Closes one connection for a connection waiting for a worker: the kept-alive idle one idle
  // longest, or else the one idle or in its request head for longest, kEvictableAfter or more.
  // False when none may be closed.
  bool EvictOne() {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    Connection* best = nullptr;
    auto better = [&](Connection* c) {
      if (c->closing || c->phase == Phase::kBusy) return false;
      const bool kept = c->phase == Phase::kIdle && c->served;
      if (!kept && now - c->since < kEvictableAfter) return false;
      if (best == nullptr) return true;
      const bool best_kept = best->phase == Phase::kIdle && best->served;
      if (kept != best_kept) return kept;
      return c->since < best->since;
    };
    for (Connection* c : live_) {
      if (better(c)) best = c;
    }
    if (best == nullptr) return false;
    CloseLocked(best);
    return true;
  }
  // The inference `c` now waits for (null: none). Cancelled at once after CutAll.
  void SetCall(Connection* c, std::shared_ptr<serving::CallState> call) {
    {
      absl::MutexLock lock(&mu_);
      if (!cut_ || call == nullptr) {
        c->call = std::move(call);
        return;
      }
    }
    call->Cancel();
  }
  // No connection is added from now on; idle ones are closed, the others close after their
  // answer (EnterIdle refuses).
  void BeginStop() {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (Connection* c : live_) {
      if (c->phase == Phase::kIdle) CloseLocked(c);
    }
  }
  // At the grace deadline: cancels the calls that open connections wait for, so that their
  // workers answer them (503) and close, and shuts down every other open connection.
  void CancelCalls() {
    std::vector<std::shared_ptr<serving::CallState>> calls;
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      cut_ = true;
      for (Connection* c : live_) {
        if (c->call != nullptr) {
          calls.push_back(std::move(c->call));
        } else {
          CloseLocked(c);
        }
      }
    }
    for (auto& call : calls) call->Cancel();  // outside the lock: hooks take queue locks
  }
  // Shuts down every open connection and cancels the calls they wait for.
  void CutAll() {
    std::vector<std::shared_ptr<serving::CallState>> calls;
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      cut_ = true;
      for (Connection* c : live_) {
        CloseLocked(c);
        if (c->call != nullptr) calls.push_back(std::move(c->call));
      }
    }
    for (auto& call : calls) call->Cancel();  // outside the lock: hooks take queue locks
  }
  bool stopping() {
    absl::MutexLock lock(&mu_);
    return stopping_;
  }
  // The grace deadline passed (CancelCalls or CutAll).
  bool cut() {
    absl::MutexLock lock(&mu_);
    return cut_;
  }
  int size() {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(live_.size());
  }
  // Accepted connections that no free worker will take (set by the task queue).
  void set_waiting(int n) { waiting_.store(n); }

 private:
  void CloseLocked(Connection* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (c->closing) return;
    c->closing = true;
    // Wakes the worker's poll; the worker closes the descriptor (after Remove, so never here
    // after it was closed).
    ::shutdown(c->fd, SHUT_RDWR);
  }

  absl::Mutex mu_;
  absl::flat_hash_set<Connection*> live_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool cut_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int> waiting_{0};
};

namespace {

// When the connection the worker thread is about to serve was accepted (set by ConnectionQueue).
thread_local absl::Time accepted_at;

// The connection tasks: `threads` workers and at most as many tasks waiting; a further connection
// waits in the accept loop (enqueue blocks without holding the lock), so the kernel's listen queue
// holds the rest instead of an unbounded list here. When accepted connections have waited for a
// worker for kStarvedFor, one connection that is idle or slow is closed for each
// (ConnectionTable::EvictOne), at the next connection accepted or at the latest kEvictionInterval
// later, and again every kEvictionInterval while they wait. A wait shorter than kStarvedFor closes
// nothing: a client reconnecting while its previous connection's worker finishes does not cost
// another client its kept-alive connection.
class ConnectionQueue final : public httplib::TaskQueue {
 public:
  ConnectionQueue(int threads, ConnectionTable* table)
      : workers_limit_(static_cast<size_t>(threads)), table_(table) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { Work(); });
  }
  ~ConnectionQueue() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    absl::MutexLock lock(&mu_);
    while (!stop_ && tasks_.size() >= workers_limit_) {
      EvictForStarved();
      mu_.AwaitWithTimeout(absl::Condition(
                               +[](ConnectionQueue* q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mu_) {
                                 return q->stop_ || q->tasks_.size() < q->workers_limit_;
                               },
                               this),
                           kEvictionInterval);
    }
    if (stop_) {
      mu_.Unlock();
      fn();  // closes the connection at once: the table is stopping
      mu_.Lock();
      return;
    }
    tasks_.push_back([fn = std::move(fn), at = absl::Now()] {
      accepted_at = at;
      fn();
    });
    UpdateStarved();
    EvictForStarved();
  }

  // The accept loop calls this when no connection arrived for an idle interval.
  void on_idle() override {
    absl::MutexLock lock(&mu_);
    EvictForStarved();
  }

  void shutdown() override {
    {
      absl::MutexLock lock(&mu_);
      if (stop_ && workers_.empty()) return;
      stop_ = true;
    }
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

 private:
  void Work() {
    while (true) {
      std::function<void()> fn;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](ConnectionQueue* q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mu_) {
              return q->stop_ || !q->tasks_.empty();
            },
            this));
        if (tasks_.empty()) return;  // stopping, and every accepted connection was served
        fn = std::move(tasks_.front());
        tasks_.pop_front();
        ++busy_;
      }
      fn();
      absl::MutexLock lock(&mu_);
      --busy_;
      UpdateStarved();
    }
  }

  // Accepted connections that no free worker will take.
  size_t Starved() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return busy_ + tasks_.size() > workers_limit_ ? busy_ + tasks_.size() - workers_limit_ : 0;
  }

  // Notes when connections started to wait for a worker; the table learns of waiting ones only
  // once they waited kStarvedFor (EvictForStarved), and at once that none wait.
  void UpdateStarved() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (Starved() == 0) {
      starved_since_ = absl::InfiniteFuture();
      table_->set_waiting(0);
    } else if (starved_since_ == absl::InfiniteFuture()) {
      starved_since_ = absl::Now();
    }
  }

  // When connections have waited kStarvedFor: tells the table (kept-alive connections then close
  // instead of waiting idle) and closes one idle or slow connection for each.
  void EvictForStarved() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const size_t starved = Starved();
    if (starved == 0 || absl::Now() - starved_since_ < kStarvedFor) return;
    table_->set_waiting(static_cast<int>(starved));
    for (size_t n = starved; n > 0 && table_->EvictOne(); --n) {
    }
  }

  const size_t workers_limit_;
  ConnectionTable* const table_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  size_t busy_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time starved_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  std::vector<std::thread> workers_;
};

std::string Address(const sockaddr_storage& addr, int* port) {
  char text[INET6_ADDRSTRLEN] = "";
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
    *port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
    *port = ntohs(a->sin6_port);
  }
  return text;
}

// A request answered before it reached a handler (a head or body bound, its framing, its
// credentials or its body's admission, checked from the head; an unknown route), counted in
// grove_requests_total: under its route's method and model when `request` (may be null: the head
// was not read whole) names one, else under method "REST".
void RecordRefused(Runtime* runtime, const httplib::Request* request, int status) {
  std::string model;
  const char* method = "REST";
  if (request != nullptr) {
    absl::StatusOr<RestRoute> route = ParseRestRoute(request->method, request->path);
    if (route.ok()) {
      method = route->method;
      if (!route->model.empty()) model = ModelLabel(runtime, route->model);
    }
  }
  runtime->metrics().RecordRequest(model, method, CodeOfHttpStatus(status), -1,
                                   Operation::kPredict);
}

// One connection's socket (non-blocking), read and written here with or without TLS, for
// cpp-httplib to parse under groved's bounds (BoundedRequestStream), with the request and response
// deadlines and the memory budget of HttpServer.
// Used by its worker thread only, but for SetCall's table.
class ConnectionStream final : public BoundedRequestStream {
 public:
  ConnectionStream(const HttpOptions& options, Runtime* runtime, ConnectionTable* table,
                   Connection* conn)
      : BoundedRequestStream(options.head),
        options_(options),
        runtime_(runtime),
        table_(table),
        conn_(conn) {}
  ~ConnectionStream() override {
    if (ssl_ != nullptr) SSL_free(ssl_);
  }

  // TLS: the handshake, within the request timeout. False: close the connection.
  bool Handshake(SSL_CTX* ctx) {
    ssl_ = SSL_new(ctx);
    if (ssl_ == nullptr || SSL_set_fd(ssl_, conn_->fd) != 1) return false;
    SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    const absl::Time deadline = absl::Now() + options_.request_timeout;
    while (true) {
      const int r = SSL_accept(ssl_);
      if (r == 1) return true;
      if (!WaitFor(SSL_get_error(ssl_, r), deadline)) return false;
    }
  }
  SSL* ssl() const { return ssl_; }

  // Waits up to the keep-alive timeout for the next request's first byte. False: close the
  // connection (timed out, closed by the client or by the table).
  bool NextRequest() {
    BeginRequest();
    reservations_.clear();
    write_deadline_ = absl::InfiniteFuture();
    if (!table_->EnterIdle(conn_)) return false;
    if (!buffered() && (ssl_ == nullptr || SSL_pending(ssl_) == 0)) {
      if (!Poll(POLLIN, absl::Now() + options_.keep_alive_timeout)) return false;
    }
    if (!table_->EnterHead(conn_)) return false;
    read_deadline_ = absl::Now() + options_.request_timeout;
    return true;
  }

  void SetCall(std::shared_ptr<serving::CallState> call) {
    table_->SetCall(conn_, std::move(call));
  }
  bool stopping() const { return table_->stopping(); }
  bool cut() const { return table_->cut(); }

  // Closes the connection: TLS close_notify, the end of our side, the client's unread bytes
  // dropped (kLingerTime) when its request was not read whole, then close.
  void Close(bool clean) {
    reservations_.clear();  // nothing of the request is held while its connection lingers
    if (ssl_ != nullptr && clean && !refused()) SSL_shutdown(ssl_);
    if (close_after_answer() && table_->EnterLinger(conn_)) {
      ::shutdown(conn_->fd, SHUT_WR);
      const absl::Time deadline = absl::Now() + kLingerTime;
      char scratch[16384];
      const int64_t most = options_.max_body_bytes + options_.head.max_head_bytes;
      int64_t dropped = 0;
      while (dropped < most && Poll(POLLIN, deadline)) {
        const ssize_t n = ::recv(conn_->fd, scratch, sizeof(scratch), 0);
        if (n > 0) {
          dropped += n;
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
          break;
        }
      }
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (getpeername(conn_->fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      ip = Address(addr, &port);
    }
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (getsockname(conn_->fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      ip = Address(addr, &port);
    }
  }
  socket_t socket() const override { return conn_->fd; }

 private:
  void OnHeadDone() override { table_->EnterBusy(conn_); }
  void OnRefused(int status) override { RecordRefused(runtime_, nullptr, status); }

  absl::Status Admit(int64_t cost) override {
    absl::StatusOr<serving::MemoryReservation> r = runtime_->ReserveReceivedBytes(cost);
    if (!r.ok()) return r.status();
    reservations_.push_back(*std::move(r));
    return absl::OkStatus();
  }

  // Reads what the socket holds, waiting until the request's deadline (408 after it).
  ssize_t Receive(char* buffer, size_t size) override {
    while (true) {
      ssize_t n;
      int ssl_error = SSL_ERROR_WANT_READ;
      if (ssl_ != nullptr) {
        ERR_clear_error();
        n = SSL_read(ssl_, buffer, static_cast<int>(std::min<size_t>(size, INT32_MAX)));
        if (n > 0) return n;
        ssl_error = SSL_get_error(ssl_, static_cast<int>(n));
        if (ssl_error == SSL_ERROR_ZERO_RETURN) return 0;
        if (ssl_error != SSL_ERROR_WANT_READ && ssl_error != SSL_ERROR_WANT_WRITE) return -1;
      } else {
        n = ::recv(conn_->fd, buffer, size, 0);
        if (n >= 0) return n;
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      }
      if (!WaitFor(ssl_error, read_deadline_)) {
        if (absl::Now() >= read_deadline_) {
          Refuse(408, absl::StrCat("the request did not arrive within ",
                                   absl::ToInt64Seconds(options_.request_timeout),
                                   " s (--http_timeout_seconds)"));
        }
        return -1;
      }
    }
  }

  // Writes within the answer's deadline (set at its first write), or kLingerTime for an answer
  // to a request refused while it was read.
  ssize_t Send(const char* data, size_t size) override {
    if (write_deadline_ == absl::InfiniteFuture()) {
      write_deadline_ = absl::Now() + (refused() ? kLingerTime : options_.request_timeout);
    }
    while (true) {
      ssize_t n;
      int ssl_error = SSL_ERROR_WANT_WRITE;
      if (ssl_ != nullptr) {
        ERR_clear_error();
        n = SSL_write(ssl_, data, static_cast<int>(std::min<size_t>(size, INT32_MAX)));
        if (n > 0) return n;
        ssl_error = SSL_get_error(ssl_, static_cast<int>(n));
        if (ssl_error != SSL_ERROR_WANT_READ && ssl_error != SSL_ERROR_WANT_WRITE) return -1;
      } else {
        n = ::send(conn_->fd, data, size, MSG_NOSIGNAL);
        if (n >= 0) return n;
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      }
      if (!WaitFor(ssl_error, write_deadline_)) return -1;
    }
  }

  // Waits for what `ssl_error` (SSL_ERROR_WANT_READ / WANT_WRITE) asks for until `deadline`.
  bool WaitFor(int ssl_error, absl::Time deadline) {
    if (ssl_error == SSL_ERROR_WANT_READ) return Poll(POLLIN, deadline);
    if (ssl_error == SSL_ERROR_WANT_WRITE) return Poll(POLLOUT, deadline);
    return false;
  }

  // True when the socket is ready for `events` (or closed) before `deadline`.
  bool Poll(short events, absl::Time deadline) {
    while (true) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return false;
      pollfd p{conn_->fd, events, 0};
      const int64_t ms = std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, INT32_MAX);
      const int r = ::poll(&p, 1, static_cast<int>(ms));
      if (r > 0) return true;
      if (r < 0 && errno != EINTR) return false;
    }
  }

  const HttpOptions& options_;
  Runtime* const runtime_;
  ConnectionTable* const table_;
  Connection* const conn_;
  SSL* ssl_ = nullptr;
  absl::Time read_deadline_ = absl::InfiniteFuture();
  absl::Time write_deadline_ = absl::InfiniteFuture();
  std::vector<serving::MemoryReservation> reservations_;  // the body's admission
};

// The stream of the connection this thread serves (cpp-httplib calls the handlers on it).
thread_local ConnectionStream* current_stream = nullptr;

using ProcessRequest =
    std::function<bool(httplib::Stream&, bool close_connection, bool& connection_closed, SSL*)>;

// A connection's life: (TLS handshake), then requests until it is closed by either side, kept
// alive idle too long, closed for a waiting connection, or the server stops.
void ServeConnection(const HttpOptions& options, Runtime* runtime, ConnectionTable* table,
                     int fd, SSL_CTX* tls, const ProcessRequest& process) {
  Connection conn(fd, accepted_at);
  if (!table->Add(&conn)) {
    ::close(fd);
    return;
  }
  const int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  bool clean = true;
  {
    ConnectionStream stream(options, runtime, table, &conn);
    bool open = true;
    if (tls != nullptr) {
      table->EnterHead(&conn);
      open = stream.Handshake(tls);
      clean = open;
    }
    current_stream = &stream;
    // cpp-httplib's keep-alive bound, kept: a busy connection's worker goes to a waiting one now
    // and then.
    constexpr int kMaxRequests = 1000;
    for (int served = 0; open && served < kMaxRequests; ++served) {
      if (!stream.NextRequest()) break;
      bool closed = false;
      const bool last = served + 1 == kMaxRequests || table->stopping();
      clean = process(stream, last, closed, stream.ssl());
      open = clean && !closed && !last && !stream.close_after_answer();
    }
    current_stream = nullptr;
    stream.Close(clean);
  }
  table->Remove(&conn);
  ::close(fd);
}

// Serves each connection through ServeConnection instead of cpp-httplib's own loop (Base:
// httplib::Server or httplib::SSLServer, whose TLS context it uses).
template <typename Base>
class GuardedServer final : public Base {
 public:
  template <typename... Args>
  GuardedServer(const HttpOptions* options, Runtime* runtime, ConnectionTable* table,
                Args&&... args)
      : Base(std::forward<Args>(args)...), options_(options), runtime_(runtime), table_(table) {}

  // cpp-httplib listens with a backlog of 5: a burst of clients would be refused by the kernel.
  void RaiseBacklog() { ::listen(this->svr_sock_, kListenBacklog); }

 private:
  bool process_and_close_socket(socket_t sock) override {
    SSL_CTX* tls = nullptr;
    if constexpr (std::is_same_v<Base, httplib::SSLServer>) tls = this->ssl_context();
    ServeConnection(*options_, runtime_, table_, sock, tls,
                    [this](httplib::Stream& stream, bool close_connection, bool& closed, SSL* ssl) {
                      return this->process_request(stream, close_connection, closed,
                                                   [ssl](httplib::Request& req) { req.ssl = ssl; });
                    });
    return true;
  }

  const HttpOptions* const options_;
  Runtime* const runtime_;
  ConnectionTable* const table_;
};

// The common name of the verified client certificate ("" when none).
std::string CertificateName(const httplib::Request& request) {
  if (request.ssl == nullptr) return "";
  X509* cert = SSL_get0_peer_certificate(request.ssl);
  if (cert == nullptr) return "";
  char cn[256];
  const int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn,
                                          sizeof(cn));
  return n > 0 ? std::string(cn, static_cast<size_t>(n)) : "";
}

// OK when `authorizer` is null or the request holds `required` (UNAUTHENTICATED or
// PERMISSION_DENIED naming `method` otherwise); when admitted, `principal` (may be null) receives
// the caller's auth::CallerPrincipal.
absl::Status Authorize(const auth::Authorizer* authorizer, const httplib::Request& request,
                       auth::Role required, const char* method, std::string* principal = nullptr) {
  if (principal != nullptr) principal->clear();
  if (authorizer == nullptr) return absl::OkStatus();
  auth::CallerCredentials caller;
  const size_t count = request.get_header_value_count("Authorization");
  std::vector<std::string> values;
  for (size_t i = 0; i < count; ++i) values.push_back(request.get_header_value("Authorization", i));
  for (const std::string& v : values) caller.authorization.emplace_back(v);
  const std::string name = authorizer->certificates_enabled() ? CertificateName(request) : "";
  caller.certificate_name = name;
  caller.carrier = "header";
  absl::Status s = authorizer->Check(caller, required, method);
  if (s.ok() && principal != nullptr) *principal = auth::CallerPrincipal(caller);
  return s;
}

void SetStatus(httplib::Response& response, const absl::Status& status) {
  response.status = HttpStatus(status.code());
  if (!status.ok()) response.set_content(RestError(status.message()), "application/json");
}

// -1 when absent; INVALID_ARGUMENT when not a non-negative integer.
absl::StatusOr<int64_t> HeaderLength(const httplib::Request& request) {
  if (!request.has_header(kInferHeaderLength)) return -1;
  const std::string h = request.get_header_value(kInferHeaderLength);
  int64_t v = 0;
  if (!absl::SimpleAtoi(h, &v) || v < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kInferHeaderLength, ": '", h, "' is not a non-negative integer"));
  }
  return v;
}

// Answers `error` and closes the connection after the answer. The body the request announced is
// not read, so nothing after the headers on this connection can be told apart from it. cpp-httplib
// closes a connection whose response body could not be written whole: the provider writes the whole
// body and then reports failure. An answer to HEAD has no body, so a refused HEAD request is
// answered as a GET would be: with the body, then the connection closed.
void RefuseAndClose(const FramingError& error, const httplib::Request& request,
                    httplib::Response& response) {
  // cpp-httplib's request is its own (non-const) object, passed to handlers by const reference.
  if (request.method == "HEAD") const_cast<httplib::Request&>(request).method = "GET";
  if (current_stream != nullptr) current_stream->CloseAfterAnswer();
  response.status = error.status;
  response.set_header("Connection", "close");
  std::string body = RestError(error.message);
  const size_t size = body.size();
  response.set_content_provider(
      size, "application/json",
      [body = std::move(body)](size_t offset, size_t length, httplib::DataSink& sink) {
        sink.write(body.data() + offset, length);
        return false;
      });
}

// What one REST call records (the counterpart of UnaryCall for gRPC).
struct CallRecord {
  const char* method = "";
  std::string model_label;
  absl::Time start = absl::Now();
  bool observe_latency = false;
  Operation op = Operation::kPredict;
  ResolvedCall resolved;
};

// Answers an inference: parse, queue, wait for the result (no lock held), reply.
absl::Status Infer(Runtime* runtime, const httplib::Request& http, const RestRoute& route,
                   const std::string& principal, httplib::Response& out, CallRecord* record) {
  inference::ModelInferRequest request;
  request.set_model_name(route.model);
  request.set_model_version(route.version);
  absl::StatusOr<int64_t> header_length = HeaderLength(http);
  if (!header_length.ok()) return header_length.status();
  // The model first: a body for a model that is not there is not parsed, and the numbers its
  // JSON may hold are bounded by what one request to the model may carry.
  absl::StatusOr<int64_t> version = ParseKserveVersion(route.version);
  if (!version.ok()) return version.status();
  auto model = runtime->registry().Get(route.model, *version);
  if (!model.ok()) return model.status();
  const int64_t max_values =
      SaturatingBytes((*model)->config->max_request_rows, (*model)->forest().num_features, 1);
  if (absl::Status s = ParseRestInferRequest(http.body, *header_length, max_values, &request);
      !s.ok()) {
    return s;
  }
  inference::ModelInferResponse response;
  absl::Notification finished;
  absl::Status result;
  absl::Status started = StartKserveInfer(
      runtime, request, &response, absl::InfiniteFuture(),
      [record](const std::shared_ptr<CallState>& call, Operation op) {
        record->op = op;
        record->observe_latency = true;
        // Cancelled when the server cuts the connection at its shutdown deadline.
        if (current_stream != nullptr) current_stream->SetCall(call);
      },
      [&](absl::Status status) {
        result = std::move(status);
        finished.Notify();
      },
      &record->resolved, {}, principal);
  if (!started.ok()) return started;
  finished.WaitForNotification();
  if (current_stream != nullptr) {
    current_stream->SetCall(nullptr);
    if (!result.ok() && current_stream->cut()) {
      return absl::UnavailableError(
          "the server is shutting down: the call was cancelled at the end of its grace period "
          "(--shutdown_grace_seconds)");
    }
  }
  if (!result.ok()) return result;
  int64_t json_length = -1;
  std::string body = RestInferResponse(request, response, &json_length);
  if (json_length >= 0) out.set_header(kInferHeaderLength, absl::StrCat(json_length));
  out.status = 200;
  out.set_content(std::move(body),
                  json_length >= 0 ? "application/octet-stream" : "application/json");
  return absl::OkStatus();
}

// The request naming the route's model and version (ModelReady, ModelMetadata).
template <typename Request>
Request ModelRequest(const RestRoute& route) {
  Request request;
  request.set_name(route.model);
  request.set_version(route.version);
  return request;
}

// Repository load / unload: runs on the control thread; the worker waits for it (no lock held).
absl::Status Control(Runtime* runtime, const HttpOptions& options, const httplib::Request& http,
                     const RestRoute& route) {
  inference::RepositoryIndexRequest unused;
  inference::RepositoryModelLoadRequest request;
  if (absl::Status s = ParseRestRepositoryRequest(http.body, route.op, &unused, &request);
      !s.ok()) {
    return s;
  }
  const ModelControl op =
      route.op == RestOp::kRepositoryModelLoad ? ModelControl::kLoad : ModelControl::kUnload;
  if (std::string refused = RefusedRepositoryArgument("", request.parameters(), op);
      !refused.empty()) {
    return absl::UnimplementedError(absl::StrCat(
        route.method, " with ", refused, " is not supported: groved loads models from the files "
        "of its one repository (no config or files in the request)"));
  }
  absl::Notification finished;
  absl::Status result;
  StartModelControl(runtime, options.model_control, op, route.model, absl::InfiniteFuture(),
                    [] { return false; },
                    [&](absl::Status s) {
                      result = std::move(s);
                      finished.Notify();
                    });
  finished.WaitForNotification();
  return result;
}

// Shared memory register / unregister: runs on the control thread; the worker waits for it (no
// lock held).
absl::Status SharedMemory(Runtime* runtime, const httplib::Request& http, const RestRoute& route,
                          const std::string& principal) {
  SharedMemoryControl control = SharedMemoryControl::Unregister(route.region);
  if (route.op == RestOp::kSystemSharedMemoryRegister) {
    inference::SystemSharedMemoryRegisterRequest request;
    if (absl::Status s = ParseRestSharedMemoryRegister(http.body, &request); !s.ok()) return s;
    control = SharedMemoryControl::Register(route.region, request.key(), request.offset(),
                                            request.byte_size());
  }
  control.owner = principal;
  absl::Notification finished;
  absl::Status result;
  StartSharedMemoryControl(runtime, std::move(control), absl::InfiniteFuture(),
                           [] { return false; },
                           [&](absl::Status s, std::vector<std::string>) {
                             result = std::move(s);
                             finished.Notify();
                           });
  finished.WaitForNotification();
  return result;
}

// The model's configuration, statistics, or the repository index, as JSON into `out`.
absl::Status Describe(Runtime* runtime, const httplib::Request& http, const RestRoute& route,
                      httplib::Response& out) {
  absl::Status status;
  std::string body;
  if (route.op == RestOp::kModelConfig) {
    inference::ModelConfigResponse response;
    status = KserveModelConfig(runtime, ModelRequest<inference::ModelConfigRequest>(route),
                               &response);
    body = RestModelConfig(response.config());
  } else if (route.op == RestOp::kModelStatistics) {
    inference::ModelStatisticsResponse response;
    status = KserveModelStatistics(
        runtime, ModelRequest<inference::ModelStatisticsRequest>(route), &response);
    body = RestModelStatistics(response);
  } else {
    inference::RepositoryIndexRequest request;
    inference::RepositoryModelLoadRequest unused;
    status = ParseRestRepositoryRequest(http.body, route.op, &request, &unused);
    inference::RepositoryIndexResponse response;
    if (status.ok()) status = KserveRepositoryIndex(runtime, request, &response);
    body = RestRepositoryIndex(response);
  }
  if (status.ok()) out.set_content(std::move(body), "application/json");
  return status;
}

// The role a route needs: none for health and readiness (as on gRPC), admin for model control,
// infer for the rest.
std::optional<auth::Role> RequiredRole(RestOp op) {
  switch (op) {
    case RestOp::kServerLive:
    case RestOp::kServerReady:
    case RestOp::kModelReady:
      return std::nullopt;
    case RestOp::kRepositoryModelLoad:
    case RestOp::kRepositoryModelUnload:
    case RestOp::kSystemSharedMemoryRegister:
    case RestOp::kSystemSharedMemoryUnregister:
      return auth::Role::kAdmin;
    default:
      return auth::Role::kInfer;
  }
}

// Serves `route` into `out` (errors included); the status to record.
absl::Status Serve(Runtime* runtime, const auth::Authorizer* authorizer,
                   const HttpOptions& options, const httplib::Request& http,
                   const RestRoute& route, httplib::Response& out, CallRecord* record) {
  const std::optional<auth::Role> role = RequiredRole(route.op);
  std::string principal;  // the caller, owner of the shared memory regions it registers
  absl::Status status =
      role ? Authorize(authorizer, http, *role, route.method, &principal) : absl::OkStatus();
  if (status.ok()) {
    switch (route.op) {
      case RestOp::kServerLive:
        break;
      case RestOp::kServerReady:
        status = runtime->Readiness();
        break;
      case RestOp::kModelReady: {
        inference::ModelReadyResponse response;
        status = KserveModelReady(runtime, ModelRequest<inference::ModelReadyRequest>(route),
                                  &response);
        if (status.ok() && !response.ready()) {
          status = absl::UnavailableError(absl::StrCat("model '", route.model, "' is not ready"));
        }
        break;
      }
      case RestOp::kServerMetadata: {
        inference::ServerMetadataResponse response;
        KserveServerMetadata(runtime->shared_memory_enabled(), &response);
        out.set_content(RestServerMetadata(response), "application/json");
        break;
      }
      case RestOp::kModelMetadata: {
        inference::ModelMetadataResponse response;
        status = KserveModelMetadata(runtime, ModelRequest<inference::ModelMetadataRequest>(route),
                                     &response);
        if (status.ok()) out.set_content(RestModelMetadata(response), "application/json");
        break;
      }
      case RestOp::kModelInfer:
        status = Infer(runtime, http, route, principal, out, record);
        if (status.ok()) return status;
        break;
      case RestOp::kModelConfig:
      case RestOp::kModelStatistics:
      case RestOp::kRepositoryIndex:
        status = Describe(runtime, http, route, out);
        if (status.ok()) return status;
        break;
      case RestOp::kRepositoryModelLoad:
      case RestOp::kRepositoryModelUnload:
        status = Control(runtime, options, http, route);
        break;
      case RestOp::kSystemSharedMemoryStatus: {
        inference::SystemSharedMemoryStatusRequest request;
        request.set_name(route.region);
        inference::SystemSharedMemoryStatusResponse response;
        status = KserveSystemSharedMemoryStatus(runtime, request, principal, &response);
        if (status.ok()) {
          out.set_content(RestSystemSharedMemoryStatus(response), "application/json");
        }
        break;
      }
      case RestOp::kSystemSharedMemoryRegister:
      case RestOp::kSystemSharedMemoryUnregister:
        status = SharedMemory(runtime, http, route, principal);
        break;
      case RestOp::kCudaSharedMemory:
        status = CudaSharedMemoryUnimplemented(route.method);
        break;
    }
  }
  SetStatus(out, status);
  return status;
}

// The body length a request's head announces once CheckFraming passed it: -1 chunked, 0 none.
int64_t AnnouncedLength(const httplib::Request& req) {
  if (req.has_header("Transfer-Encoding")) return -1;
  int64_t length = 0;
  if (req.has_header("Content-Length")) {
    (void)absl::SimpleAtoi(req.get_header_value("Content-Length"), &length);
  }
  return length;
}

// What is checked of a request whose body follows, from its head, before any of the body is
// read: the route and the credentials, then AdmitBodyFromHead. The answer when it is refused (the
// connection then closes: its body is not read).
std::optional<FramingError> AdmitBody(const HttpOptions& options,
                                      const auth::Authorizer* authorizer,
                                      const httplib::Request& req, int64_t length, bool chunked) {
  absl::StatusOr<RestRoute> route = ParseRestRoute(req.method, req.path);
  if (!route.ok()) {
    return FramingError{HttpStatus(route.status().code()), std::string(route.status().message())};
  }
  if (std::optional<auth::Role> role = RequiredRole(route->op)) {
    if (absl::Status s = Authorize(authorizer, req, *role, route->method); !s.ok()) {
      return FramingError{HttpStatus(s.code()), std::string(s.message())};
    }
  }
  if (current_stream == nullptr) return std::nullopt;
  return AdmitBodyFromHead(req, length, chunked,
                           {.max_body_bytes = options.max_body_bytes,
                            .max_json_body_bytes = options.max_json_body_bytes},
                           current_stream);
}

}  // namespace

absl::Status ValidateHttpOptions(const HttpOptions& o) {
  if (o.port < 0 || o.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--http_port ", o.port, " is outside 0..65535"));
  }
  if (o.threads < 1 || o.threads > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http_threads ", o.threads, " is outside 1..1024"));
  }
  if (o.request_timeout < absl::Seconds(1) || o.request_timeout > absl::Hours(1)) {
    return absl::InvalidArgumentError("--http_timeout_seconds is outside 1..3600");
  }
  if (o.keep_alive_timeout < absl::Seconds(1) || o.keep_alive_timeout > absl::Hours(1)) {
    return absl::InvalidArgumentError("--http_keep_alive_seconds is outside 1..3600");
  }
  if (o.max_body_bytes < 1) {
    return absl::InvalidArgumentError("the REST body limit (--max_message_bytes) is not positive");
  }
  if (o.max_json_body_bytes < 1) {
    return absl::InvalidArgumentError("--http_max_json_body_mb is not positive");
  }
  if (o.head.max_line_bytes < 64 || o.head.max_fields < 1 ||
      o.head.max_head_bytes < o.head.max_line_bytes) {
    return absl::InvalidArgumentError("the REST request head limits are out of range");
  }
  return absl::OkStatus();
}

HttpServer::HttpServer(const HttpOptions& options, Runtime* runtime,
                       const auth::Authorizer* authorizer)
    : options_(options), runtime_(runtime), authorizer_(authorizer) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpOptions& options,
                                                              Runtime* runtime,
                                                              const auth::Authorizer* authorizer) {
  if (absl::Status s = ValidateHttpOptions(options); !s.ok()) return s;
  // The PEM files are read here once so that a missing or unreadable one is named (the TLS
  // context loads them itself and would only say that it is not valid).
  for (const std::string& f :
       {options.tls_cert_file, options.tls_key_file, options.tls_client_ca_file}) {
    if (f.empty()) continue;
    absl::StatusOr<std::string> text = ReadRegularFile(f, int64_t{1} << 20);
    if (!text.ok()) return text.status();
  }
  std::unique_ptr<HttpServer> server(new HttpServer(options, runtime, authorizer));
  server->table_ = std::make_unique<ConnectionTable>();
  ConnectionTable* table = server->table_.get();
  if (!options.tls_cert_file.empty()) {
    server->server_ = std::make_unique<GuardedServer<httplib::SSLServer>>(
        &server->options_, runtime, table, options.tls_cert_file.c_str(),
        options.tls_key_file.c_str(),
        options.tls_client_ca_file.empty() ? nullptr : options.tls_client_ca_file.c_str());
  } else {
    server->server_ = std::make_unique<GuardedServer<httplib::Server>>(&server->options_,
                                                                       runtime, table);
  }
  httplib::Server& http = *server->server_;
  if (!http.is_valid()) {
    return absl::InvalidArgumentError(
        absl::StrCat("REST TLS: the certificate ", options.tls_cert_file, ", key ",
                     options.tls_key_file, " or client CA do not make a valid TLS context"));
  }
  const int threads = options.threads;
  http.new_task_queue = [threads, table] { return new ConnectionQueue(threads, table); };
  http.set_payload_max_length(static_cast<size_t>(options.max_body_bytes));
  // Timeouts and keep-alive are ConnectionStream's and ServeConnection's; these two only set what
  // the Keep-Alive answer header tells clients.
  http.set_keep_alive_timeout(absl::ToInt64Seconds(options.keep_alive_timeout));
  http.set_keep_alive_max_count(1000);
  // The accept loop wakes this often when no connection arrives, so that a connection waiting for
  // a worker can have an idle or slow one closed for it (ConnectionQueue::on_idle).
  http.set_idle_interval(absl::ToChronoMicroseconds(kEvictionInterval));
  // SO_REUSEADDR only: without SO_REUSEPORT (cpp-httplib's default sets it) a second groved on the
  // port fails to start instead of sharing its requests. TCP_NODELAY (inherited by accepted
  // sockets): a response goes out in two writes, header and body, and with Nagle's algorithm the
  // body would wait for the client's delayed ACK on every kept-alive request.
  http.set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
  });
  const int64_t limit = options.max_body_bytes;
  http.set_error_handler([limit](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty() || res.has_header("Content-Type")) return;  // a handler's own answer
    std::string message = absl::StrCat("HTTP status ", res.status);
    if (res.status == 413) {
      message = absl::StrCat("the request body is larger than the limit of ", limit,
                             " bytes (--max_message_bytes)");
    }
    res.set_content(RestError(message), "application/json");
  });
  HttpServer* self = server.get();
  auto handler = [self](const httplib::Request& req, httplib::Response& res) {
    self->Handle(req, res);
  };
  // The pre-routing handler runs once the head is read and before any of the body is. The framing
  // is checked first (CheckFraming). A request without Content-Length or chunked encoding has no
  // body (tritonclient.http's repository and load calls are such POSTs): it is served here, since
  // cpp-httplib would answer 400 for a POST or read a PUT's or DELETE's body until the connection
  // closes. One with a body is admitted (AdmitBody) before cpp-httplib reads the body.
  const HttpOptions* opts = &server->options_;
  // The refusal of a request that announces a body, from its head; nothing when its body may be
  // read.
  auto admit = [opts, authorizer](const httplib::Request& req) -> std::optional<FramingError> {
    if (std::optional<FramingError> error = CheckFraming(req, opts->max_body_bytes)) return error;
    const int64_t length = AnnouncedLength(req);
    if (length == 0) return std::nullopt;
    return AdmitBody(*opts, authorizer, req, length, length < 0);
  };
  http.set_pre_routing_handler([self, admit](const httplib::Request& req,
                                             httplib::Response& res) {
    if (std::optional<FramingError> error = admit(req)) {
      RecordRefused(self->runtime_, &req, error->status);
      RefuseAndClose(*error, req, res);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (AnnouncedLength(req) == 0) {
      self->Handle(req, res);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // A client that asks before it sends its body (Expect: 100-continue; curl does for bodies above
  // 1 MiB) is refused before it sends any of it, by the same checks (the pre-routing handler then
  // finds them passed: its admission is not taken twice).
  http.set_expect_100_continue_handler([self, admit](const httplib::Request& req,
                                                     httplib::Response& res) {
    if (std::optional<FramingError> error = admit(req)) {
      RecordRefused(self->runtime_, &req, error->status);
      RefuseAndClose(*error, req, res);
      return error->status;
    }
    return 100;
  });
  for (auto method : {&httplib::Server::Get, &httplib::Server::Post, &httplib::Server::Put,
                      &httplib::Server::Delete, &httplib::Server::Patch}) {
    (http.*method)(".*", handler);
  }
  const bool bound = options.port == 0
                         ? (server->port_ = http.bind_to_any_port(options.address)) > 0
                         : http.bind_to_port(options.address, options.port);
  if (!bound) {
    return absl::UnavailableError(absl::StrCat(
        "cannot bind the REST port ", options.address, ":", options.port,
        ": the address is in use (another groved?) or not available on this host"));
  }
  if (options.port != 0) server->port_ = options.port;
  if (options.tls_cert_file.empty()) {
    static_cast<GuardedServer<httplib::Server>&>(http).RaiseBacklog();
  } else {
    static_cast<GuardedServer<httplib::SSLServer>&>(http).RaiseBacklog();
  }
  server->listener_done_ = std::make_shared<absl::Notification>();
  server->listener_ = std::thread([self, done = server->listener_done_] {
    self->server_->listen_after_bind();
    done->Notify();
  });
  return server;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::BeginStop() {
  // No accept loop when Start failed before it began.
  if (server_ == nullptr || listener_done_ == nullptr || table_->stopping()) return;
  table_->BeginStop();
  // stop() does nothing before the accept loop runs: wait for it (or for its end).
  while (!server_->is_running() && !listener_done_->HasBeenNotified()) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  server_->stop();
}

void HttpServer::Stop(absl::Time deadline) {
  if (server_ == nullptr) return;
  if (listener_done_ == nullptr) {  // Start failed before the accept loop began
    server_.reset();
    return;
  }
  BeginStop();
  if (!listener_done_->WaitForNotificationWithDeadline(deadline)) {
    GROVE_LOG(WARNING) << "shutdown: cancelling REST calls and closing the connections still open "
                          "at the grace deadline"
                       << KV("connections", table_->size());
    table_->CancelCalls();
    if (!listener_done_->WaitForNotificationWithTimeout(kCancelledAnswerTime)) table_->CutAll();
  }
  if (listener_.joinable()) listener_.join();
  server_.reset();
}


void HttpServer::Handle(const httplib::Request& request, httplib::Response& response) {
  // The connection closes after this answer (ServeConnection): say so.
  if (current_stream != nullptr && current_stream->stopping()) {
    response.set_header("Connection", "close");
  }
  absl::StatusOr<RestRoute> route = ParseRestRoute(request.method, request.path);
  if (!route.ok()) {
    SetStatus(response, route.status());
    RecordRefused(runtime_, nullptr, response.status);
    return;
  }
  CallRecord record;
  record.method = route->method;
  if (!route->model.empty()) record.model_label = ModelLabel(runtime_, route->model);
  runtime_->metrics().InflightRequests(record.method, 1);
  const absl::Status status =
      Serve(runtime_, authorizer_, options_, request, *route, response, &record);
  RecordFinishedCall(runtime_, record.model_label, record.method, status.code(), record.start,
                     record.observe_latency, record.op, record.resolved);
  runtime_->metrics().InflightRequests(record.method, -1);
}

}  // namespace grove::server
