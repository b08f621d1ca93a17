"""Loopback ports for servers that tests and benchmarks start on this machine."""
import random
import socket


def ephemeral_ports():
    """The kernel's range for outgoing connections' local ports (and for bind to port 0)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def free_port():
    """A loopback port free now, for a server this test is about to start. Picked below the
    kernel's ephemeral range: a port from bind(0) lies in that range, where any test's
    outgoing connection (ctest runs two tests at once; some open hundreds) may take it
    between this check and the server's bind, and the server then fails with "Address
    already in use". Above 20000, clear of the fixed ports other tools use."""
    lo, _ = ephemeral_ports()
    if lo > 21000:
        for _ in range(100):
            port = random.randint(20000, lo - 1)
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
