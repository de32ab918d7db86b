# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The syscall filter every sandbox runs under, compiled by libseccomp (`pyseccomp`).

A deny list over an allowing default, like Flatpak's: what Docker's and Flatpak's default
profiles refuse that no task needs (shell, IPython, editor, test suites, pip, git). Each entry
says why. bubblewrap loads the compiled program itself (`--seccomp FD`) just before it runs the
sandbox's command, so its own set-up (mounts, namespaces) is not filtered and everything the
command starts is. Syscalls of another ABI (32-bit x86 on x86_64, x32) are killed: libseccomp's
filter matches the native architecture only.

`DENIED` is the list as data; docs/sandboxes.md prints it.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
from dataclasses import dataclass

import pyseccomp

# clone(2) flags that make a namespace (linux/sched.h). New user namespaces are the door to
# most kernel attack surface an unprivileged process can reach; the others need one first.
CLONE_NEW_NAMESPACES = (
    0x10000000 | 0x00020000 | 0x04000000 | 0x08000000 | 0x20000000 | 0x40000000 | 0x02000000
)
# (NEWUSER, NEWNS, NEWUTS, NEWIPC, NEWPID, NEWNET, NEWCGROUP)
_TIOCSTI = 0x5412  # push bytes into a terminal's input: types commands into whoever reads it
_TIOCLINUX = 0x541C  # the Linux console's escape hatch (TIOCLINUX subcodes copy and paste)
_SETID_BITS = (stat.S_ISUID, stat.S_ISGID)
# Address families a task uses: AF_UNIX (1), AF_INET (2), AF_INET6 (10), AF_NETLINK (16).
_ALLOWED_FAMILIES = {1, 2, 10, 16}
_FCHMODAT2 = 452  # newer than some libseccomp releases know by name; same number on every ABI


@dataclass(frozen=True)
class Denied:
    """One refusal: the syscall, the argument test (None: every call), the errno, and why."""

    syscall: str | int
    reason: str
    args: tuple[pyseccomp.Arg, ...] = ()
    errno_: int = errno.EPERM
    condition: str = ""


def _setid_mode(syscall: str | int, mode_arg: int, reason: str) -> list[Denied]:
    return [
        Denied(
            syscall,
            reason,
            (pyseccomp.Arg(mode_arg, pyseccomp.MASKED_EQ, bit, bit),),
            condition=f"mode has {'S_ISUID' if bit == stat.S_ISUID else 'S_ISGID'}",
        )
        for bit in _SETID_BITS
    ]


_SETID = "a setuid/setgid file the policy makes would be honoured by the host outside the sandbox"
_MOUNT = "reshapes the filesystem view: only bubblewrap, before the filter, builds it"
_NS = "a new or joined namespace: new user namespaces open most of the kernel to an unprivileged process"
_KEYS = "kernel keyrings are not namespaced: keys of other processes of the same uid"
_KERNEL = "changes the running kernel or the host"
_PEEK = "reads or writes another process's memory or handles"
_HANDLE = "opens a file by handle, around the mount namespace (the 'shocker' escape)"

DENIED: tuple[Denied, ...] = (
    # Namespaces and mounts.
    Denied("unshare", _NS),
    Denied("setns", _NS),
    Denied("clone", _NS, condition="flags hold a CLONE_NEW* flag"),
    Denied(
        "clone3",
        "its flags sit in a struct a filter cannot read; libc falls back to clone",
        errno_=errno.ENOSYS,
    ),
    *(
        Denied(name, _MOUNT)
        for name in (
            "mount",
            "umount",
            "umount2",
            "pivot_root",
            "chroot",
            "fsopen",
            "fsconfig",
            "fsmount",
            "fspick",
            "move_mount",
            "open_tree",
            "mount_setattr",
        )
    ),
    # Kernel attack surface no task needs.
    *(Denied(name, _KEYS) for name in ("add_key", "keyctl", "request_key")),
    Denied("bpf", "loads programs into the kernel"),
    Denied("perf_event_open", "performance counters: side channels and a long record of kernel bugs"),
    Denied("userfaultfd", "stalls the kernel mid-copy: the usual tool for exploiting kernel races"),
    *(
        Denied(name, "io_uring: a second syscall interface that seccomp does not see")
        for name in ("io_uring_setup", "io_uring_enter", "io_uring_register")
    ),
    *(
        Denied(name, _KERNEL)
        for name in (
            "init_module",
            "finit_module",
            "delete_module",
            "create_module",
            "query_module",
            "get_kernel_syms",
            "kexec_load",
            "kexec_file_load",
            "reboot",
            "swapon",
            "swapoff",
            "settimeofday",
            "clock_settime",
            "clock_adjtime",
            "acct",
            "quotactl",
            "quotactl_fd",
            "nfsservctl",
            "syslog",
            "vhangup",
            "lookup_dcookie",
            "sysfs",
            "_sysctl",
            "uselib",
            "ustat",
            "ioperm",
            "iopl",
            "vm86",
            "vm86old",
        )
    ),
    *(
        Denied(name, "moves memory between NUMA nodes of the host")
        for name in ("mbind", "set_mempolicy", "move_pages", "migrate_pages")
    ),
    # Other processes.
    *(
        Denied(name, _PEEK)
        for name in ("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd")
    ),
    *(Denied(name, _HANDLE) for name in ("name_to_handle_at", "open_by_handle_at")),
    # The terminal.
    Denied(
        "ioctl",
        "TIOCSTI types into the terminal's input queue, as if its reader had typed it",
        (pyseccomp.Arg(1, pyseccomp.MASKED_EQ, 0xFFFFFFFF, _TIOCSTI),),
        condition="request TIOCSTI",
    ),
    Denied(
        "ioctl",
        "TIOCLINUX reaches the Linux console",
        (pyseccomp.Arg(1, pyseccomp.MASKED_EQ, 0xFFFFFFFF, _TIOCLINUX),),
        condition="request TIOCLINUX",
    ),
    # Files the host would honour as setuid or setgid.
    *_setid_mode("chmod", 1, _SETID),
    *_setid_mode("fchmod", 1, _SETID),
    *_setid_mode("fchmodat", 2, _SETID),
    *_setid_mode(_FCHMODAT2, 2, _SETID),
    *_setid_mode("open", 2, _SETID),
    *_setid_mode("openat", 3, _SETID),
    *_setid_mode("creat", 1, _SETID),
    *_setid_mode("mknod", 1, _SETID),
    *_setid_mode("mknodat", 2, _SETID),
    Denied(
        "openat2",
        "its mode sits in a struct a filter cannot read; libc's open does not use it",
        errno_=errno.ENOSYS,
    ),
    # Sockets of families no task uses: kernel code far from the common path (AF_ALG, AF_VSOCK
    # reaches the hypervisor's host across network namespaces).
    Denied(
        "socket",
        "address families other than unix, inet, inet6 and netlink",
        errno_=errno.EAFNOSUPPORT,
        condition="family not in {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK}",
    ),
)


def _add(sfilter: pyseccomp.SyscallFilter, action: int, syscall: str | int, *args: pyseccomp.Arg) -> None:
    try:
        sfilter.add_rule(action, syscall, *args)
    except (OSError, ValueError, RuntimeError):
        # A syscall this architecture does not have (vm86 off i386, say): nothing to deny.
        pass


# What a harness's fork server may still do, that the children it forks may not: each child
# gives itself a user and mount namespace of its own (a private home, siblings' hidden), then
# loads the whole filter itself (`load_filter`) before any harness code runs.
FORK_SERVER_ALLOWS = frozenset({"unshare", "mount"})


def build_filter(allow: frozenset[str] = frozenset()) -> pyseccomp.SyscallFilter:
    """The filter as libseccomp holds it (allow by default, deny `DENIED` but `allow`)."""
    sfilter = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    for rule in DENIED:
        if rule.syscall in allow:
            continue
        if rule.syscall == "clone":
            # Deny clone when any namespace flag is set: one rule per flag (libseccomp compares
            # one masked value per argument and rule).
            for bit in range(32):
                flag = 1 << bit
                if CLONE_NEW_NAMESPACES & flag:
                    _add(
                        sfilter,
                        pyseccomp.ERRNO(errno.EPERM),
                        "clone",
                        pyseccomp.Arg(0, pyseccomp.MASKED_EQ, flag, flag),
                    )
        elif rule.syscall == "socket":
            for family in range(64):
                if family not in _ALLOWED_FAMILIES:
                    _add(
                        sfilter,
                        pyseccomp.ERRNO(rule.errno_),
                        "socket",
                        pyseccomp.Arg(0, pyseccomp.EQ, family),
                    )
            _add(sfilter, pyseccomp.ERRNO(rule.errno_), "socket", pyseccomp.Arg(0, pyseccomp.GE, 64))
        else:
            _add(sfilter, pyseccomp.ERRNO(rule.errno_), rule.syscall, *rule.args)
    return sfilter


@functools.cache
def compiled_filter(allow: frozenset[str] = frozenset()) -> bytes:
    """The BPF program bubblewrap loads (`--seccomp FD`), built once per process."""
    fd = os.memfd_create("prorl-seccomp-build", os.MFD_CLOEXEC)
    with os.fdopen(fd, "w+b") as buffer:
        build_filter(allow).export_bpf(buffer)
        buffer.seek(0)
        return buffer.read()


def load_filter() -> None:
    """Put this process (and all it starts) under the whole filter, from the inside."""
    build_filter().load()


def filter_fd(allow: frozenset[str] = frozenset()) -> int:
    """A fresh file descriptor holding the program at offset 0, for one bubblewrap to read and
    close (each reader needs its own offset). The caller closes its copy once the child runs."""
    program = compiled_filter(allow)
    fd = os.memfd_create("prorl-seccomp", os.MFD_CLOEXEC)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
