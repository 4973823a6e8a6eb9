// Named limits of the host agent (`gpuhub agent`, src/agent).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace gpuhub::agent {

// A helper program (nvidia-smi, cryptsetup, rbd, blkdiscard) gets this long, and this much of its
// output is kept; more is an error (a tool that floods its output is not answering our question).
inline constexpr std::chrono::milliseconds kToolTimeout{30'000};
inline constexpr std::chrono::milliseconds kEraseTimeout{10 * 60'000};  // blkdiscard of a disk
inline constexpr std::size_t kMaxToolOutputBytes = 1 << 20;
// Calls to the server (heartbeat, usage, enrolment) and to the Docker Engine API.
inline constexpr std::chrono::milliseconds kServerTimeout{10'000};
inline constexpr std::chrono::milliseconds kDockerTimeout{60'000};
// Pulling an image can take long (a CUDA image is gigabytes); it runs beside the loop.
inline constexpr std::chrono::milliseconds kImagePullTimeout{60 * 60'000};
inline constexpr std::size_t kMaxConcurrentPulls = 2;
// Docker's answer to a list or stats call.
inline constexpr std::size_t kMaxDockerResponseBytes = 8 << 20;
// The agent's own loop: how often it reconciles the containers with the desired state.
inline constexpr std::chrono::milliseconds kReconcileInterval{1'000};
// Defaults until the server says otherwise (it answers both intervals in each heartbeat).
inline constexpr std::chrono::milliseconds kDefaultHeartbeatInterval{15'000};
// The long-poll of the desired state (GET /v1/agent/desired): the longest wait the agent asks
// (the server's own bound, http/limits.h), the back-off after a failed poll (doubling from the
// first to the most), and the pause before the next poll when the server did not wait (a standby
// answers at once).
inline constexpr std::int64_t kMaxDesiredWaitSeconds = 25;
inline constexpr std::chrono::milliseconds kDesiredRetryFirst{1'000};
inline constexpr std::chrono::milliseconds kDesiredRetryMax{60'000};
inline constexpr std::chrono::milliseconds kDesiredNoWaitPause{5'000};
// After a container starts: its sshd is probed on 127.0.0.1:PORT (an "SSH-" banner) every
// kSshProbeInterval, each attempt bounded by kSshProbeAttemptTimeout, for at most the config's
// ssh_ready_timeout_ms (at most this); kMaxSshProbes at once.
inline constexpr std::int64_t kMaxSshReadyTimeoutMs = 10 * 60'000;
inline constexpr std::chrono::milliseconds kSshProbeInterval{100};
inline constexpr std::chrono::milliseconds kSshProbeAttemptTimeout{1'000};
inline constexpr std::size_t kMaxSshProbes = 16;
inline constexpr std::chrono::milliseconds kDefaultUsageInterval{60'000};
// A container that fails to start is retried after 30 s, doubling up to 10 minutes.
inline constexpr std::chrono::milliseconds kRetryFirst{30'000};
inline constexpr std::chrono::milliseconds kRetryMax{10 * 60'000};
// A desired container Docker will not start (paused, dead, removing: 409) is removed and created
// again: at once the first time, then no sooner than 5 s after the last recreate, doubling up to
// 5 minutes. A workload whose container has run 30 minutes since its last recreate starts over.
inline constexpr std::chrono::milliseconds kRecreateBackoffFirst{5'000};
inline constexpr std::chrono::milliseconds kRecreateBackoffMax{5 * 60'000};
inline constexpr std::chrono::milliseconds kRecreateForgetAfter{30 * 60'000};
// A host port Docker could not bind (another program, often an outgoing connection's ephemeral
// port, holds it) is not offered again for this long; then it is tried again.
inline constexpr std::chrono::milliseconds kBadPortForgetAfter{10 * 60'000};
// Workloads one host runs at once (one per lease; a 16-GPU machine has at most 16).
inline constexpr std::size_t kMaxWorkloads = 64;
// A workload's extra container ports (besides sshd's 22).
inline constexpr std::size_t kMaxExtraPorts = 4;
// A term rental's volumes: one per card slot of a node (rentals::kMaxCardsPerNode).
inline constexpr std::size_t kMaxVolumesPerWorkload = 16;
// A workload's network volumes (Ceph, volumes.h), the monitors one may list, how long a mount
// may take (ceph-fuse's own client_mount_timeout, then RunProcess's deadline).
inline constexpr std::size_t kMaxNetworkVolumesPerWorkload = 8;
inline constexpr std::size_t kMaxCephMonitors = 16;
inline constexpr int kCephMountTimeoutSeconds = 20;
inline constexpr std::chrono::milliseconds kMountTimeout{60'000};
inline constexpr std::size_t kMaxMountInfoBytes = 16 << 20;  // /proc/self/mountinfo
// The SSH ports published for containers come from a configured range of at most this many.
inline constexpr int kMaxSshPorts = 10'000;
// A stopping container gets this long (seconds) between SIGTERM and SIGKILL.
inline constexpr int kStopGraceSeconds = 5;
// Docker Engine API versions: DeviceRequests need 1.40; requests use the daemon's version up to
// the newest one this agent was written against.
inline constexpr int kMinDockerApiMinor = 41;
inline constexpr int kMaxDockerApiMinor = 47;
// XIDs NVIDIA lists as caused by the application, not the GPU (the Kubernetes device plugin's
// list): they do not make a GPU unhealthy.
inline constexpr int kApplicationXids[] = {13, 31, 43, 45, 68, 109};

}  // namespace gpuhub::agent
