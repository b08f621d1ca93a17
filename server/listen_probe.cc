#include "server/listen_probe.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dllm {

std::string ListenFailureReason(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return "not a host:port address";
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* results = nullptr;
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &results);
  if (rc != 0) return std::string("cannot resolve host: ") + gai_strerror(rc);
  std::string reason;
  for (addrinfo* ai = results; ai != nullptr && reason.empty(); ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    // Like gRPC: SO_REUSEADDR (TIME_WAIT is fine) but not SO_REUSEPORT (a live listener is not).
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) reason = std::strerror(errno);
    close(fd);
  }
  freeaddrinfo(results);
  return reason;
}

}  // namespace dllm
