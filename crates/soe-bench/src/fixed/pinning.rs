//! Where the server under test and the load generator run: on CPUs of their own.
//!
//! Left to the scheduler, the two processes sometimes share a CPU and sometimes not, from one run
//! to the next, and on a virtual machine that alone changes a server's CPU per message several
//! times over: a datagram that wakes a process on another CPU costs the kernel an interrupt
//! between CPUs (a hypervisor exit on a VM) and the idle CPU's wake-up, charged to the process
//! as system time. Measured on a 2-core VM at 500 × 40 msg/s: the bare std echo 3.4–3.7 µs per
//! message on the generator's CPU, 18.4–19.0 µs on the other; `soe serve --driver blocking`
//! 8.9–10.5 and 24–25 µs. A server of a real game does not share its CPU with its players, so
//! by default ([`Placement::Apart`]) the generator takes one CPU of this process's set (the last)
//! and the server every other one. [`Placement::Shared`] puts both on that one CPU (no wake-up
//! crosses CPUs: the view in which user-space work weighs most), and [`Placement::Free`] leaves
//! them to the scheduler. With fewer than two CPUs, or off Linux, nothing is pinned and the
//! report says so.
//!
//! A child process takes the CPU set of the thread that starts it, so the set is chosen before
//! the spawn, with no window in which a server's early threads could start elsewhere.

/// Where the server under test and the load generator run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Placement {
    /// The generator on one CPU (the last of this process's set), the server on every other.
    #[default]
    Apart,
    /// Both on the same one CPU.
    Shared,
    /// Wherever the scheduler puts them.
    Free,
}

impl std::str::FromStr for Placement {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "apart" => Ok(Self::Apart),
            "shared" => Ok(Self::Shared),
            "free" => Ok(Self::Free),
            other => Err(format!(
                "unknown placement {other:?}: apart, shared or free"
            )),
        }
    }
}

/// The CPU sets of one measurement: the server's, the generator's, and the set to restore.
#[derive(Debug)]
pub(super) struct Pinning {
    #[cfg(target_os = "linux")]
    original: rustix::thread::CpuSet,
    #[cfg(target_os = "linux")]
    server: rustix::thread::CpuSet,
    #[cfg(target_os = "linux")]
    generator: rustix::thread::CpuSet,
}

impl Pinning {
    /// The sets `placement` asks for, from this thread's CPU set; `None` when nothing is
    /// pinned (`Free`, or fewer than two CPUs to choose from).
    #[cfg(target_os = "linux")]
    pub(super) fn new(placement: Placement) -> Option<Self> {
        use rustix::thread::{CpuSet, sched_getaffinity};
        let original = sched_getaffinity(None).ok()?;
        let cpus: Vec<usize> = cpus(&original).collect();
        let (&last, rest) = cpus.split_last()?;
        if rest.is_empty() {
            return None;
        }
        let mut generator = CpuSet::new();
        generator.set(last);
        let server = match placement {
            Placement::Free => return None,
            Placement::Shared => generator,
            Placement::Apart => {
                let mut server = CpuSet::new();
                for &c in rest {
                    server.set(c);
                }
                server
            }
        };
        Some(Self {
            original,
            server,
            generator,
        })
    }

    /// Off Linux, nothing is pinned.
    #[cfg(not(target_os = "linux"))]
    pub(super) fn new(_placement: Placement) -> Option<Self> {
        None
    }

    /// Puts this thread on the server's CPUs (for the spawn), then calls `start`, then moves
    /// this thread to the generator's CPU, where it stays until [`Pinning::restore`].
    pub(super) fn start_server<T>(&self, start: impl FnOnce() -> T) -> T {
        self.set(Which::Server);
        let started = start();
        self.set(Which::Generator);
        started
    }

    /// Gives this thread back the CPU set it had.
    pub(super) fn restore(&self) {
        self.set(Which::Original);
    }

    #[cfg(target_os = "linux")]
    fn set(&self, which: Which) {
        let set = match which {
            Which::Original => &self.original,
            Which::Server => &self.server,
            Which::Generator => &self.generator,
        };
        // A refusal (a container's policy, say) leaves the thread where it was: the figures are
        // then the scheduler's, as without pinning.
        let _ = rustix::thread::sched_setaffinity(None, set);
    }

    #[cfg(not(target_os = "linux"))]
    fn set(&self, _which: Which) {}

    /// The CPUs of each side, for the report: `(server, generator)`.
    #[cfg(target_os = "linux")]
    pub(super) fn describe(&self) -> (String, String) {
        (cpu_list(&self.server), cpu_list(&self.generator))
    }

    /// Off Linux there is no split to describe.
    #[cfg(not(target_os = "linux"))]
    pub(super) fn describe(&self) -> (String, String) {
        (String::new(), String::new())
    }
}

/// The CPUs in `set`, lowest first.
#[cfg(target_os = "linux")]
fn cpus(set: &rustix::thread::CpuSet) -> impl Iterator<Item = usize> + '_ {
    (0..rustix::thread::CpuSet::MAX_CPU).filter(|&c| set.is_set(c))
}

/// The CPUs in `set` as the report writes them: `0,2,3`.
#[cfg(target_os = "linux")]
fn cpu_list(set: &rustix::thread::CpuSet) -> String {
    cpus(set)
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[derive(Debug, Clone, Copy)]
enum Which {
    Original,
    Server,
    Generator,
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_server_started_inside_runs_on_the_server_cpus_and_this_thread_then_on_the_generators() {
        // Run on a thread of its own, so that the test harness's threads keep their sets.
        std::thread::spawn(|| {
            let Some(pinning) = Pinning::new(Placement::Apart) else {
                eprintln!("skipped: this process has fewer than two CPUs");
                return;
            };
            let (server, generator) = pinning.describe();
            let child = pinning.start_server(|| {
                std::process::Command::new("sleep")
                    .arg("5")
                    .spawn()
                    .expect("sleep")
            });
            let pid = rustix::process::Pid::from_child(&child);
            let child_set = rustix::thread::sched_getaffinity(Some(pid)).expect("child's set");
            let mine = rustix::thread::sched_getaffinity(None).expect("own set");
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
            assert_eq!(cpu_list(&child_set), server);
            assert_eq!(cpu_list(&mine), generator);
            assert!(!server.split(',').any(|c| c == generator));
            pinning.restore();
            let back = rustix::thread::sched_getaffinity(None).expect("own set");
            assert_eq!(cpu_list(&back), cpu_list(&pinning.original));
        })
        .join()
        .expect("the test thread");
    }

    #[test]
    fn shared_puts_both_on_one_cpu_and_free_pins_nothing() {
        assert!(Pinning::new(Placement::Free).is_none());
        if let Some(shared) = Pinning::new(Placement::Shared) {
            let (server, generator) = shared.describe();
            assert_eq!(server, generator);
            assert!(!server.contains(','), "{server}");
        }
        assert_eq!("shared".parse::<Placement>(), Ok(Placement::Shared));
        assert!("elsewhere".parse::<Placement>().is_err());
    }
}
