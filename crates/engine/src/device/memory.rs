//! The memory a run may take on its device, for the check it makes before it allocates its
//! network. On the CPU that is the smallest of what the host has free, what the memory limit
//! of the process's control group leaves (the limit a container sets: Docker's `--memory`,
//! Kubernetes' limits, Slurm's `--mem`) and what the process's own limits leave
//! (`ulimit -v`, `ulimit -d`): past any of them an allocation aborts the process.

use std::fmt;

use sysinfo::{MemoryRefreshKind, RefreshKind, System};

use super::BackendKind;

/// The memory a run may still take, and which limit sets that figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryRoom {
    pub bytes: u64,
    pub set_by: MemoryLimit,
}

/// What bounds the memory a process may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryLimit {
    /// The memory the OS reports as available.
    HostFree,
    /// The memory limit of the process's control group, less what the group uses.
    ControlGroup,
    /// `RLIMIT_AS` (`ulimit -v`), less the process's address space.
    AddressSpace,
    /// `RLIMIT_DATA` (`ulimit -d`), less the process's data segment.
    DataSegment,
}

impl fmt::Display for MemoryLimit {
    /// The end of "more than the 1 GiB …".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemoryLimit::HostFree => "this machine has free",
            MemoryLimit::ControlGroup => {
                "that the memory limit of this process's control group (a container's limit) \
                 leaves"
            }
            MemoryLimit::AddressSpace => {
                "that this process's address-space limit (RLIMIT_AS, `ulimit -v`) leaves"
            }
            MemoryLimit::DataSegment => {
                "that this process's data-size limit (RLIMIT_DATA, `ulimit -d`) leaves"
            }
        })
    }
}

/// The memory free for a run on `kind`'s device: on the CPU backend the tightest of the
/// limits above; `None` on a GPU, whose allocator reports running out itself.
pub fn room(kind: BackendKind) -> Option<MemoryRoom> {
    match kind {
        BackendKind::Ndarray => {
            let memory =
                RefreshKind::nothing().with_memory(MemoryRefreshKind::nothing().with_ram());
            let host = MemoryRoom {
                bytes: System::new_with_specifics(memory).available_memory(),
                set_by: MemoryLimit::HostFree,
            };
            Some(process_limits().into_iter().fold(host, |tightest, room| {
                match room.bytes < tightest.bytes {
                    true => room,
                    false => tightest,
                }
            }))
        }
        BackendKind::Cuda | BackendKind::Wgpu => None,
    }
}

/// The room each limit set on this process leaves.
#[cfg(target_os = "linux")]
fn process_limits() -> Vec<MemoryRoom> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let mut limits = Vec::new();
    for (resource, field, set_by) in [
        (libc::RLIMIT_AS, "VmSize:", MemoryLimit::AddressSpace),
        (libc::RLIMIT_DATA, "VmData:", MemoryLimit::DataSegment),
    ] {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit only writes the struct it is given.
        let read = unsafe { libc::getrlimit(resource, &mut limit) };
        let limit = (read == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur);
        if let (Some(limit), Some(used)) = (limit, status_bytes(&status, field)) {
            limits.push(MemoryRoom {
                bytes: limit.saturating_sub(used),
                set_by,
            });
        }
    }
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    if let Some(bytes) = control_group_room(&cgroups, std::path::Path::new("/sys/fs/cgroup")) {
        limits.push(MemoryRoom {
            bytes,
            set_by: MemoryLimit::ControlGroup,
        });
    }
    limits
}

#[cfg(not(target_os = "linux"))]
fn process_limits() -> Vec<MemoryRoom> {
    Vec::new()
}

/// A `kB` field of `/proc/self/status` (`VmSize:   123 kB`), in bytes.
fn status_bytes(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with(field))?;
    let kilobytes: u64 = line[field.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kilobytes * 1024)
}

/// What the memory limits of this process's control group leave, from its
/// `/proc/self/cgroup` lines and the cgroup file systems under `root`: every level from its
/// own group up to the top of the hierarchy is a limit (cgroup v2's `memory.max` less
/// `memory.current`, v1's `memory.limit_in_bytes` less `memory.usage_in_bytes`). Where the
/// group's folder is not visible (a container sees only its own part of the hierarchy), the
/// top visible level is the container's own group.
fn control_group_room(cgroups: &str, root: &std::path::Path) -> Option<u64> {
    let mut room: Option<u64> = None;
    for line in cgroups.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let (mount, limit_file, usage_file) = if id == "0" && controllers.is_empty() {
            let unified = root.join("unified");
            let mount = match unified.join("cgroup.controllers").is_file() {
                true => unified,
                false => root.to_path_buf(),
            };
            (mount, "memory.max", "memory.current")
        } else if controllers.split(',').any(|name| name == "memory") {
            let mount = root.join("memory");
            (mount, "memory.limit_in_bytes", "memory.usage_in_bytes")
        } else {
            continue;
        };
        let own = mount.join(path.trim_start_matches('/'));
        let mut level = match own.is_dir() {
            true => own.as_path(),
            false => mount.as_path(),
        };
        loop {
            let read = |file: &str| std::fs::read_to_string(level.join(file)).ok();
            if let (Some(limit), Some(usage)) = (read(limit_file), read(usage_file)) {
                // cgroup v2 says `max`; v1 says a number near 2^63 for no limit.
                let limit = limit
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|&bytes| bytes < 1 << 62);
                if let (Some(limit), Ok(usage)) = (limit, usage.trim().parse::<u64>()) {
                    let left = limit.saturating_sub(usage);
                    room = Some(room.map_or(left, |room| room.min(left)));
                }
            }
            match level.parent() {
                Some(parent) if level != mount && parent.starts_with(&mount) => level = parent,
                _ => break,
            }
        }
    }
    room
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_level_of_a_control_group_is_a_limit_and_the_tightest_counts() {
        let root = tempfile::tempdir().unwrap();
        let write = |path: &str, text: &str| {
            let path = root.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        // v2: the job's group leaves 300, its parent 100.
        write("cgroup.controllers", "memory");
        write("slurm/memory.max", "1000\n");
        write("slurm/memory.current", "900\n");
        write("slurm/job/memory.max", "max\n");
        write("slurm/job/memory.current", "50\n");
        write("slurm/job/step/memory.max", "400\n");
        write("slurm/job/step/memory.current", "100\n");
        assert_eq!(
            control_group_room("0::/slurm/job/step\n", root.path()),
            Some(100)
        );
        assert_eq!(control_group_room("0::/other\n", root.path()), None);
        // v1 beside it; a group folder the container cannot see falls back to the mount's.
        write("memory/memory.limit_in_bytes", "9223372036854771712\n");
        write("memory/memory.usage_in_bytes", "5\n");
        write("memory/docker/memory.limit_in_bytes", "70\n");
        write("memory/docker/memory.usage_in_bytes", "20\n");
        let v1 = "4:memory:/docker\n1:cpu:/\n";
        assert_eq!(control_group_room(v1, root.path()), Some(50));
        assert_eq!(
            control_group_room("4:cpuset,memory:/elsewhere\n", root.path()),
            None
        );
    }

    #[test]
    fn status_fields_are_read_in_bytes() {
        let status = "Name:\tcubenet\nVmSize:\t  2048 kB\nVmData:\t 512 kB\n";
        assert_eq!(status_bytes(status, "VmSize:"), Some(2048 * 1024));
        assert_eq!(status_bytes(status, "VmData:"), Some(512 * 1024));
        assert_eq!(status_bytes(status, "VmRSS:"), None);
    }
}
