#include "core/common/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "core/common/json_string.h"

namespace grove {
namespace {

std::atomic<int> g_format{static_cast<int>(LogFormat::kText)};
std::atomic<int> g_min_severity{static_cast<int>(LogSeverity::kInfo)};
std::mutex g_write_mu;

const char* SeverityName(LogSeverity s) {
  switch (s) {
    case LogSeverity::kDebug: return "DEBUG";
    case LogSeverity::kInfo: return "INFO";
    case LogSeverity::kWarning: return "WARNING";
    case LogSeverity::kError: return "ERROR";
  }
  return "INFO";
}

std::string Timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const int millis = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm;
  gmtime_r(&secs, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
  return buf;
}

const char* BaseName(const char* path) {
  const char* base = path;
  for (const char* p = path; *p; ++p) {
    if (*p == '/') base = p + 1;
  }
  return base;
}

}  // namespace

void SetLogFormat(LogFormat format) { g_format = static_cast<int>(format); }
void SetMinLogSeverity(LogSeverity severity) { g_min_severity = static_cast<int>(severity); }
bool LogEnabled(LogSeverity severity) { return static_cast<int>(severity) >= g_min_severity; }

LogMessage::LogMessage(LogSeverity severity, const char* file, int line)
    : severity_(severity), file_(file), line_(line) {}

LogMessage& LogMessage::operator<<(const KV& kv) {
  fields_text_ += ' ';
  fields_text_ += kv.key;
  fields_text_ += '=';
  fields_text_ += kv.value;
  fields_json_ += ',';
  AppendJsonString(fields_json_, kv.key);
  fields_json_ += ':';
  AppendJsonString(fields_json_, kv.value);
  return *this;
}

LogMessage::~LogMessage() {
  std::string line;
  if (g_format == static_cast<int>(LogFormat::kJson)) {
    line = "{\"ts\":";
    AppendJsonString(line, Timestamp());
    line += ",\"level\":";
    AppendJsonString(line, SeverityName(severity_));
    line += ",\"src\":";
    AppendJsonString(line, std::string(BaseName(file_)) + ":" + std::to_string(line_));
    line += ",\"msg\":";
    AppendJsonString(line, message_.str());
    line += fields_json_;
    line += "}\n";
  } else {
    line = Timestamp() + " " + SeverityName(severity_) + " " + BaseName(file_) + ":" +
           std::to_string(line_) + "] " + message_.str() + fields_text_ + "\n";
  }
  std::lock_guard<std::mutex> lock(g_write_mu);
  ssize_t ignored = ::write(2, line.data(), line.size());
  (void)ignored;
}

}  // namespace grove
