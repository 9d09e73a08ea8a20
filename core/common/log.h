// Minimal structured logging (Debian's Abseil 20220623 has no absl/log).
//
// GROVE_LOG(INFO) << "model loaded" << KV("model", name) << KV("seconds", s);
// writes one line to stderr: `2026-11-22T13:00:00.123Z INFO file.cc:42] model loaded model=x seconds=0.1`
// or, after SetLogFormat(LogFormat::kJson), a JSON object per line. Thread-safe: each line is written
// with a single write under a mutex.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

namespace grove {

enum class LogSeverity { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };
enum class LogFormat { kText, kJson };

void SetLogFormat(LogFormat format);
void SetMinLogSeverity(LogSeverity severity);
bool LogEnabled(LogSeverity severity);

// A key=value field of a structured log line.
struct KV {
  template <typename T>
  KV(std::string_view k, const T& v) : key(k) {
    std::ostringstream os;
    os << v;
    value = os.str();
  }
  std::string key;
  std::string value;
};

class LogMessage {
 public:
  LogMessage(LogSeverity severity, const char* file, int line);
  ~LogMessage();
  LogMessage& operator<<(const KV& kv);
  template <typename T>
  LogMessage& operator<<(const T& v) {
    message_ << v;
    return *this;
  }

 private:
  LogSeverity severity_;
  const char* file_;
  int line_;
  std::ostringstream message_;
  std::string fields_text_;
  std::string fields_json_;
};

}  // namespace grove

#define GROVE_LOG_SEVERITY_DEBUG ::grove::LogSeverity::kDebug
#define GROVE_LOG_SEVERITY_INFO ::grove::LogSeverity::kInfo
#define GROVE_LOG_SEVERITY_WARNING ::grove::LogSeverity::kWarning
#define GROVE_LOG_SEVERITY_ERROR ::grove::LogSeverity::kError
#define GROVE_LOG(sev)                                        \
  if (!::grove::LogEnabled(GROVE_LOG_SEVERITY_##sev)) {       \
  } else                                                      \
    ::grove::LogMessage(GROVE_LOG_SEVERITY_##sev, __FILE__, __LINE__)
