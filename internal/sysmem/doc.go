// Package sysmem reports how much memory this process can still use and
// which limit sets that number. Training checks its estimated needs against
// [Available] before allocating anything, so that a run too big for the
// machine is refused with the numbers rather than killed by the kernel.
//
// On Linux it reads every place the kernel keeps a limit:
//
//   - MemAvailable of /proc/meminfo, the kernel's estimate of what can be
//     allocated without swapping;
//   - cgroup v2: the process's cgroup (the "0::/path" line of
//     /proc/self/cgroup) under the cgroup2 mount found in
//     /proc/self/mountinfo, and memory.max less memory.current of that
//     group and of each parent up to the mount's root ("max" is no limit);
//   - cgroup v1: the group of the memory controller's line
//     ("4:memory:/path") under the v1 mount whose options name memory, and
//     memory.limit_in_bytes less memory.usage_in_bytes of that group and of
//     each parent up to the mount's root. v1 writes "no limit" as a huge
//     number (9223372036854771712, LONG_MAX rounded to pages): 2⁶² bytes or
//     more count as none. A parent whose memory.use_hierarchy is 0 does not
//     charge its children, and ends the walk.
//
// A cgroup's usage counts the page cache, which the kernel reclaims before
// it refuses memory. Like container runtimes' "working set", the usage is
// taken without the inactive file cache of the group's memory.stat
// (inactive_file in v2, total_inactive_file in v1, else inactive_file),
// never below 0; without a readable memory.stat, the whole usage counts.
//
// The smallest room wins: a process is stopped by whichever limit it reaches
// first. A group the mount cannot reach, as under a cgroup namespace
// ("/../.."), or whose directory is missing, is read at the mount's root,
// which in a container is the container's own group. Files that are missing,
// unreadable or garbled are passed over.
package sysmem
