// An in-memory log stream that the server's threads may write while a test reads it.
//
// std::ostringstream is not safe for that: Logger serializes its writers with its own mutex, but
// a test's read takes no lock. LockedLog guards its text with a mutex of its own, so the reads
// are safe wherever they happen and ThreadSanitizer sees the order too (it cannot see the order
// that a gRPC round trip creates inside the uninstrumented gRPC library).
#ifndef DLLM_TESTS_SUPPORT_LOCKED_LOG_H_
#define DLLM_TESTS_SUPPORT_LOCKED_LOG_H_

#include <ios>
#include <ostream>
#include <streambuf>
#include <string>

#include "absl/synchronization/mutex.h"

namespace dllm::testing {

class LockedLog : public std::ostream {
 public:
  LockedLog() : std::ostream(&buffer_) {}

  // A copy of everything written so far.
  std::string str() const { return buffer_.str(); }

 private:
  // Unbuffered (no put area), so every write reaches xsputn/overflow under the mutex.
  class Buffer : public std::streambuf {
   public:
    std::string str() const {
      absl::MutexLock lock(&mu_);
      return text_;
    }

   protected:
    std::streamsize xsputn(const char* s, std::streamsize n) override {
      absl::MutexLock lock(&mu_);
      text_.append(s, static_cast<size_t>(n));
      return n;
    }
    int_type overflow(int_type c) override {
      if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
      absl::MutexLock lock(&mu_);
      text_.push_back(traits_type::to_char_type(c));
      return c;
    }

   private:
    mutable absl::Mutex mu_;
    std::string text_ ABSL_GUARDED_BY(mu_);
  };

  Buffer buffer_;
};

}  // namespace dllm::testing

#endif  // DLLM_TESTS_SUPPORT_LOCKED_LOG_H_
