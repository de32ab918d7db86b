# SPDX-FileCopyrightText: Copyright (c) 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: Apache-2.0

"""The persistent PTY shell: what a command returns, what persists, and how it survives
timeouts, floods, interrupts, `exit`, and misuse."""

from __future__ import annotations

import asyncio
import os
import shutil
import time

import pytest
from support.busy import second_call_is_refused

from nemo_gym_prorl.sandbox import Sandbox, SandboxLimits, SandboxSpec, open_sandbox
from nemo_gym_prorl.tools import pty_shell
from nemo_gym_prorl.tools.pty_shell import PtyShell, ShellBusyError, ShellError, encode_command
from nemo_gym_prorl.tools.shell_protocol import Prompt

pytestmark = pytest.mark.bwrap


# -- a command and its result -------------------------------------------------------------------
async def test_echo_returns_exact_output_exit_code_and_cwd(shell: PtyShell) -> None:
    result = await shell.run("echo hi")
    assert result.output == "hi\n"
    assert result.exit_code == 0
    assert result.cwd == "/workspace"
    assert not (result.timed_out or result.truncated or result.restarted)
    assert result.hint is None


async def test_exit_code_of_the_command_is_reported(shell: PtyShell) -> None:
    assert (await shell.run("false")).exit_code == 1
    assert (await shell.run("(exit 7)")).exit_code == 7
    assert (await shell.run("ls /nonexistent")).exit_code == 2


async def test_output_without_trailing_newline_is_kept_as_is(shell: PtyShell) -> None:
    assert (await shell.run("printf 'a\\nb'")).output == "a\nb"


async def test_one_round_trip_is_well_under_a_millisecond(shell: PtyShell) -> None:
    for _ in range(5):
        await shell.run("echo hi")
    times = []
    for _ in range(50):
        start = time.perf_counter()
        await shell.run("echo hi")
        times.append(time.perf_counter() - start)
    assert sorted(times)[len(times) // 2] < 0.001


# -- what persists ------------------------------------------------------------------------------
async def test_environment_and_working_directory_persist_between_commands(shell: PtyShell) -> None:
    await shell.run("mkdir -p sub && cd sub && export GREETING=hello")
    result = await shell.run("echo $GREETING; pwd")
    assert result.output == "hello\n/workspace/sub\n"
    assert result.cwd == "/workspace/sub"
    assert shell.cwd == "/workspace/sub"


async def test_previous_exit_status_is_visible_as_dollar_question(shell: PtyShell) -> None:
    await shell.run("false")
    assert (await shell.run("echo $?")).output == "1\n"


async def test_shell_functions_persist(shell: PtyShell) -> None:
    await shell.run('greet() { echo "hi $1"; }')
    assert (await shell.run("greet bob")).output == "hi bob\n"


# -- what a command may contain -----------------------------------------------------------------
async def test_multiline_script_runs_as_one_command(shell: PtyShell) -> None:
    result = await shell.run("for i in 1 2 3; do\n  echo $i\ndone\necho end")
    assert result.output == "1\n2\n3\nend\n"


async def test_heredoc_with_quotes_backslashes_bang_and_tabs_is_written_verbatim(shell: PtyShell) -> None:
    body = "x!y 'single' \"double\" back\\slash\ttab $NOT_EXPANDED"
    result = await shell.run(f"cat <<'EOF' > f.txt\n{body}\nEOF\ncat f.txt")
    assert result.output == body + "\n"


async def test_syntax_error_is_reported_instead_of_waiting_for_more_input(shell: PtyShell) -> None:
    result = await shell.run('echo "unterminated')
    assert result.exit_code != 0
    assert "unexpected EOF" in result.output
    assert (await shell.run("echo fine")).output == "fine\n"


async def test_command_longer_than_the_terminal_line_limit_arrives_whole(shell: PtyShell) -> None:
    # A canonical-mode terminal cuts a line at 4095 bytes; the shell must not.
    result = await shell.run("echo " + "x" * 100_000 + " | wc -c")
    assert result.output.strip() == "100001"


async def test_undecodable_text_in_a_command_does_not_break_the_call(shell: PtyShell) -> None:
    result = await shell.run("echo 'a\ud800b'")  # a lone surrogate, as broken JSON can carry
    assert result.exit_code == 0 and result.output.startswith("a")


async def test_printing_the_marker_machinery_does_not_end_a_command_early(shell: PtyShell) -> None:
    result = await shell.run(
        "declare -p PS0 PROMPT_COMMAND; echo __PRORL_0123__:0:/x:__END_0123__; echo after"
    )
    assert result.exit_code == 0
    assert result.output.endswith("__PRORL_0123__:0:/x:__END_0123__\nafter\n")


async def test_markers_split_across_reads_are_found_and_plain_output_is_not_held_back(
    sandbox: Sandbox,
) -> None:
    sh = PtyShell(sandbox)  # not started: feed the scanner by hand
    sh._event = asyncio.get_running_loop().create_future()
    marker = f"__PRORL_{sh._token}__:3:/workspace/x:__END_{sh._token}__\r\n".encode()
    for byte in b"out\r\n__PR":  # the tail could be a marker's start: only it waits
        sh._scan(bytes([byte]))
    assert sh._buf.getvalue() == b"out\r\n"
    for byte in marker[4:]:
        sh._scan(bytes([byte]))
    event = sh._event.result()
    assert (event.exit_code, event.cwd) == (3, "/workspace/x")
    assert sh._buf.getvalue() == b"out\r\n" and not sh._pending


def test_encoded_command_is_one_printable_line() -> None:
    line = encode_command("a\nb\x03\x13'\\!\x00é")
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert not any(b < 0x20 for b in line[:-1])


# -- output hygiene -------------------------------------------------------------------------------
async def test_ansi_escapes_are_stripped(shell: PtyShell) -> None:
    assert (await shell.run("printf '\\033[31mred\\033[0m plain\\n'")).output == "red plain\n"


async def test_crlf_is_normalised_and_progress_bars_collapse(shell: PtyShell) -> None:
    result = await shell.run("printf 'a\\r\\nb\\n'; printf '10%%\\r50%%\\r100%%\\n'")
    assert result.output == "a\nb\n100%\n"


async def test_output_flood_is_capped_with_head_and_tail_and_bounded_memory(sandbox: Sandbox) -> None:
    async with PtyShell(sandbox, max_output_bytes=4096, interrupt_grace_s=1.0) as sh:
        result = await sh.run("yes", timeout=1.0)
        assert result.timed_out and result.exit_code == -1
        assert result.truncated
        assert "bytes of output truncated" in result.output
        assert result.output.startswith("y\ny\n")
        assert len(result.output.encode()) < 4096 + 200
        assert sh._buf.total < 4096 * 4  # nothing keeps the flood around
        assert (await sh.run("echo after")).output == "after\n"


async def test_very_long_line_keeps_its_start_and_end(shell: PtyShell) -> None:
    result = await shell.run("python -c \"print('<' + 'x' * 1_000_000 + '>')\"")
    assert result.exit_code == 0 and result.truncated
    assert result.output.startswith("<xxx") and result.output.endswith("xxx>\n")


async def test_binary_output_comes_back_as_printable_text_and_the_shell_stays_usable(shell: PtyShell) -> None:
    result = await shell.run("head -c 20000 /dev/urandom")
    assert result.exit_code == 0
    assert not any(ord(c) < 0x20 and c not in "\n\t" for c in result.output)
    assert (await shell.run("echo still here")).output == "still here\n"


# -- timeouts and interrupts ----------------------------------------------------------------------
async def test_hard_timeout_returns_partial_output_and_keeps_the_shell_state(shell: PtyShell) -> None:
    await shell.run("export KEPT=yes")
    start = time.monotonic()
    result = await shell.run("echo started; sleep 30", timeout=0.5)
    assert time.monotonic() - start < 5
    assert result.timed_out and result.exit_code == -1
    assert "started" in result.output
    assert "timed out after 0.5s" in (result.hint or "")
    assert "Ctrl-C" in (result.hint or "") and not result.restarted
    assert (await shell.run("echo $KEPT")).output == "yes\n"


async def test_no_output_timeout_ends_a_silent_command_early(shell: PtyShell) -> None:
    start = time.monotonic()
    result = await shell.run("echo begin; sleep 30", timeout=20.0, no_output_timeout=0.5)
    assert time.monotonic() - start < 5
    assert result.timed_out and result.exit_code == -1
    assert "begin" in result.output
    assert "printed nothing for 0.5s" in (result.hint or "")


async def test_a_command_that_keeps_printing_is_not_cut_by_the_no_output_timeout(shell: PtyShell) -> None:
    result = await shell.run("for i in 1 2 3 4; do echo $i; sleep 0.3; done", no_output_timeout=0.8)
    assert not result.timed_out and result.output == "1\n2\n3\n4\n"


async def test_a_command_waiting_for_input_times_out_instead_of_hanging(shell: PtyShell) -> None:
    result = await shell.run("cat", no_output_timeout=0.5)
    assert result.timed_out
    assert "input" in (result.hint or "")
    assert (await shell.run("echo ok")).output == "ok\n"


@pytest.mark.parametrize("command", ["uniq", "cat", "python3", "read answer", "sort | uniq -c"])
async def test_a_command_typed_bare_that_waits_for_keys_is_stopped_within_seconds(
    sandbox: Sandbox, command: str
) -> None:
    # The model may ask for minutes; a command reading a terminal nobody types on gets seconds.
    async with PtyShell(sandbox, timeout=600.0, no_output_timeout=600.0, input_wait_s=1.0) as sh:
        await sh.run("export KEPT=yes")
        start = time.monotonic()
        result = await sh.run(command, timeout=600.0, no_output_timeout=600.0)
        assert time.monotonic() - start < 10
        assert result.timed_out and result.exit_code == -1
        assert "waiting for input from the terminal" in (result.hint or "")
        assert (await sh.run("echo $KEPT")).output == "yes\n"  # the same shell, ready


async def test_a_quiet_command_that_reads_no_terminal_runs_to_its_end(sandbox: Sandbox) -> None:
    async with PtyShell(sandbox, timeout=20.0, no_output_timeout=None, input_wait_s=0.5) as sh:
        result = await sh.run("sleep 2; printf 'b\\na\\n' | sort; uniq < /dev/null; echo done")
        assert not result.timed_out and result.output == "a\nb\ndone\n"


async def test_a_command_whose_end_is_still_unread_is_not_taken_for_one_waiting_for_input(
    sandbox: Sandbox,
) -> None:
    # Behind a busy event loop, bash can be back at its prompt, reading the terminal, before its
    # prompt marker is read here: stand that in by not reading the terminal in the background.
    async with PtyShell(sandbox, timeout=20.0, no_output_timeout=None, input_wait_s=0.2) as sh:
        loop = asyncio.get_running_loop()
        loop.remove_reader(sh._fd)
        try:
            result = await sh.run("echo done")
        finally:
            loop.add_reader(sh._fd, sh._on_readable)
        assert not result.timed_out and result.output == "done\n"
        assert (await sh.run("echo next")).output == "next\n"


async def test_a_job_ignoring_ctrl_c_is_killed_and_the_shell_state_kept(shell: PtyShell) -> None:
    await shell.run("export KEPT=yes")
    # "ready" is printed once the trap is set: a limit that fell before it would test nothing.
    result = await shell.run("trap '' INT; echo ready; sleep 30", timeout=3)
    assert result.timed_out and not result.restarted and "ready" in result.output
    assert "killed" in (result.hint or "")
    assert (await shell.run("echo $KEPT")).output == "yes\n"


async def test_a_shell_that_cannot_be_interrupted_is_restarted_and_says_so(shell: PtyShell) -> None:
    # The shell itself spins with the terminal's signals off: Ctrl-C is a byte nobody reads, and
    # there is no job to kill, so only a new shell helps. (`trap '' INT` is not enough: under load,
    # bash was seen to take the Ctrl-C and return to its prompt anyway.)
    await shell.run("cd /tmp && export LOST=yes")
    result = await shell.run("stty -isig; echo partial; while :; do :; done", timeout=3)
    assert result.timed_out and result.restarted
    assert "partial" in result.output
    assert "restarted" in (result.hint or "")
    after = await shell.run('echo "[$LOST]"; pwd')
    assert after.output == "[]\n/tmp\n"  # env gone, working directory kept
    assert shell.restarts == 1


async def test_a_prompt_marker_while_bash_still_spins_is_not_taken_as_recovery(
    shell: PtyShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A marker that is not this recovery's (one late from earlier) arrives right after the Ctrl-C.
    # bash is still in the loop, not reading its terminal: the shell must not be reported ready.
    send_ctrl_c = shell.interrupt

    async def ctrl_c_then_a_stray_prompt() -> None:
        await send_ctrl_c()
        shell._on_event(Prompt(exit_code=0, cwd=shell.cwd))

    monkeypatch.setattr(shell, "interrupt", ctrl_c_then_a_stray_prompt)
    result = await shell.run("stty -isig; while :; do :; done", timeout=2)  # Ctrl-C cannot stop it
    assert result.timed_out and result.restarted
    assert (await shell.run("echo ok")).output == "ok\n"


async def test_a_stray_prompt_before_the_command_starts_does_not_end_it(
    shell: PtyShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    # bash answers a Ctrl-C that reaches it at its prompt (one sent to stop a command that had
    # just ended) with a fresh prompt, status 130, and no command. Arriving after the next
    # command is typed, that prompt is not its end: the command has not even started.
    write = shell._write

    async def write_then_a_stray_prompt(data: bytes, deadline: float | None = None) -> None:
        await write(data, deadline)
        shell._on_event(Prompt(exit_code=130, cwd=shell.cwd))

    monkeypatch.setattr(shell, "_write", write_then_a_stray_prompt)
    result = await shell.run("sleep 0.2; echo next")
    assert (result.output, result.exit_code) == ("next\n", 0)


async def test_cancelled_commands_never_leak_into_the_next_ones(shell: PtyShell) -> None:
    for _ in range(5):
        task = asyncio.create_task(shell.run("sleep 30"))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        result = await shell.run("echo next")
        assert (result.output.splitlines()[-1:], result.exit_code) == (["next"], 0), result


async def test_a_ctrl_c_that_lands_while_the_next_line_is_read_does_not_cut_that_line(
    shell: PtyShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The Ctrl-C of a recovery can reach bash while it draws its prompt; it then interrupts the
    # next line bash reads, after its first bytes, and bash runs the tail (`val $'...'`).
    # Replayed here: the first line typed after a cancel gets a Ctrl-C after its first byte.
    task = asyncio.create_task(shell.run("sleep 30"))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    write, cut = shell._write, []

    async def ctrl_c_inside_the_first_line(data: bytes, deadline: float | None = None) -> None:
        if cut or not data.startswith(b"eval"):
            return await write(data, deadline)
        cut.append(data)
        await write(data[:1], deadline)
        await asyncio.sleep(0.2)  # bash has read the first byte
        await write(b"\x03" + data[1:], deadline)

    monkeypatch.setattr(shell, "_write", ctrl_c_inside_the_first_line)
    result = await shell.run("echo next")
    assert cut and (result.output.splitlines()[-1:], result.exit_code) == (["next"], 0), result


async def test_cancelled_command_is_stopped_and_the_next_one_runs(shell: PtyShell) -> None:
    task = asyncio.create_task(shell.run("sleep 30"))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    result = await shell.run("echo next")
    assert result.output.endswith("next\n") and not result.restarted


async def test_a_fork_bomb_is_contained_and_exit_clears_it() -> None:
    # The pid limit contains it; the shell's own pid namespace means a new shell leaves none
    # of it behind. Only run where the limit really binds (the pids cgroup, or not root).
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (`bwrap`) is not installed")
    with open_sandbox(SandboxSpec(limits=SandboxLimits(max_processes=32))) as sb:
        if sb.cgroup_path is None and os.geteuid() == 0:
            pytest.skip("root without a writable pids cgroup: RLIMIT_NPROC would not contain a fork bomb")
        async with PtyShell(sb, interrupt_grace_s=0.5) as sh:
            start = time.monotonic()
            await sh.run(":(){ :|:& };:", timeout=1.0)
            assert time.monotonic() - start < 5
            if sb.cgroup_path is not None:
                assert len(sb.cgroup_members()) <= 32
            assert (await sh.run("exit", timeout=10.0)).restarted
            result = await sh.run("ls / > /dev/null && echo forked", timeout=10.0)
            assert result.output == "forked\n"


# -- input to a running command --------------------------------------------------------------------
async def test_send_input_answers_a_prompt(shell: PtyShell) -> None:
    task = asyncio.create_task(shell.run("read -p 'name? ' name; echo \"hello $name\""))
    await shell.send_input("bob\n")
    result = await task
    assert result.output == "name? hello bob\n"


async def test_send_input_without_a_running_command_is_an_error(shell: PtyShell) -> None:
    with pytest.raises(ShellError, match="no command is running"):
        await shell.send_input("text\n")


# -- one command at a time -------------------------------------------------------------------------
async def test_a_second_concurrent_command_is_refused_clearly(shell: PtyShell) -> None:
    first = await second_call_is_refused(
        shell.run("sleep 0.3; echo first"), lambda: shell.run("echo second"), ShellBusyError
    )
    assert first.output == "first\n"
    assert (await shell.run("echo third")).output == "third\n"


# -- exit and restarts -----------------------------------------------------------------------------
async def test_exit_is_detected_and_a_new_shell_is_started(shell: PtyShell) -> None:
    await shell.run("mkdir -p d && cd d && export GONE=1")
    result = await shell.run("exit 3")
    assert result.exit_code == 3
    assert result.restarted and not result.timed_out
    assert "exited (status 3)" in (result.hint or "")
    after = await shell.run('echo "[$GONE]"; pwd')
    assert after.output == "[]\n/workspace/d\n"
    assert shell.alive


async def test_a_shell_killed_between_commands_is_replaced_on_the_next_command(shell: PtyShell) -> None:
    assert shell._proc is not None
    shell.sandbox.kill_process(shell._proc)
    await asyncio.sleep(0.1)
    result = await shell.run("echo back")
    assert result.output == "back\n" and result.restarted
    assert "new shell" in (result.hint or "")


# -- lifecycle --------------------------------------------------------------------------------------
async def test_close_is_idempotent_and_a_closed_shell_refuses_commands(sandbox: Sandbox) -> None:
    sh = PtyShell(sandbox)
    await sh.start()
    sh.close()
    sh.close()
    assert not sh.alive
    with pytest.raises(ShellError, match="closed"):
        await sh.run("echo hi")


async def test_close_while_a_command_runs_ends_it_with_an_error(sandbox: Sandbox) -> None:
    sh = PtyShell(sandbox)
    await sh.start()
    task = asyncio.create_task(sh.run("sleep 30"))
    await asyncio.sleep(0.1)
    sh.close()
    with pytest.raises(ShellError, match="closed"):
        await asyncio.wait_for(task, 5)


async def test_the_shell_works_the_same_without_isolation(local_sandbox: Sandbox) -> None:
    async with PtyShell(local_sandbox, timeout=10) as sh:
        result = await sh.run("echo hi; pwd")
        assert result.output == f"hi\n{local_sandbox.workspace}\n"
        assert (await sh.run("exit 4")).exit_code == 4
        assert (await sh.run("echo again")).output == "again\n"


async def test_shells_start_a_few_at_a_time_and_a_queued_start_is_not_charged_to_its_timeout(
    sandbox: Sandbox,
) -> None:
    # A thousand rollouts start their shells within seconds: all at once, hundreds passed their
    # start timeout together. Queued, a start's timeout counts from when it begins.
    slots = asyncio.Semaphore(1)
    pty_shell.start_slots.replace(asyncio.get_running_loop(), slots)
    shells = [PtyShell(sandbox, start_timeout=1.0) for _ in range(3)]
    try:
        await slots.acquire()  # someone else's start holds the only slot past every start_timeout
        runs = [asyncio.ensure_future(s.run("echo started")) for s in shells]
        await asyncio.sleep(1.5)
        assert not any(run.done() for run in runs) and not any(s.alive for s in shells)
        slots.release()
        results = await asyncio.gather(*runs)
        assert [r.output.strip() for r in results] == ["started"] * 3
    finally:
        for s in shells:
            await s.aclose()
