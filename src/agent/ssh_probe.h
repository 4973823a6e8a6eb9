// Whether a container's sshd accepts connections: the agent reports a workload "running" only
// once something on 127.0.0.1:PORT (Docker's published port) answers with an SSH identification
// line ("SSH-2.0-OpenSSH_9.2p1 ..."), so a customer who reads "ready" can log in at once. Docker's
// userland proxy accepts on the port before sshd listens (and then closes): a connection alone
// proves nothing, the banner does.
#pragma once

#include <chrono>

namespace gpuhub::agent {

// One attempt: connects to 127.0.0.1:port and reads until a line starting "SSH-" arrives (true),
// the peer closes, 1 KiB came without one, or `timeout` passes (false).
bool SshBannerAnswers(int port, std::chrono::milliseconds timeout);

}  // namespace gpuhub::agent
