"""When to ask a running device whether its program is done.

:class:`RunPacer` waits for a run the host driver just started, polling the device's COUNTERS
as rarely as it can without idling the device: the cycle model (:mod:`hwgen.cycles`) says how
many cycles the run takes, and the pacer learns how long a device cycle lasts on this link.
"""

import time

from hwgen.cycles import program_cycles

from .client import BusyTimeout

__all__ = ["RunPacer"]

# Bounds of the wait between two COUNTERS polls of a running program: short enough not to idle a
# fast device, long enough not to flood the link while a slow one (a simulation) computes.
_POLL_MIN_S = 0.0002
_POLL_MAX_S = 0.05
# Sleeps shorter than this are not worth a system call; the COUNTERS round trip takes longer.
_SLEEP_MIN_S = 0.0001


class RunPacer:
    """The seconds per device cycle as last measured, and the waits they give.

    Parameters
    ----------
    timeout : float
        Seconds a run may go on beyond its expected end before :class:`BusyTimeout`.
    seconds_per_cycle : float or None
        The first estimate (the clock period); None until :meth:`program_loaded` sets it.
    synchronous : bool
        The device finishes a run before answering RUN: poll at once, never sleep.
    """

    def __init__(self, timeout, seconds_per_cycle=None, *, synchronous=False):
        self.timeout = timeout
        self.seconds_per_cycle = 0.0 if synchronous else seconds_per_cycle
        self._program = None
        self._expected = {}  # rows of a run -> cycles it takes, for the program

    def program_loaded(self, program):
        """Use the cycle model of ``program`` from now on (and its clock, if nothing better is
        known)."""
        if self.seconds_per_cycle is None:
            self.seconds_per_cycle = 1.0 / program.config.clock_hz
        self._program = program
        self._expected = {}

    def wait(self, stage, m, began, poll):
        """Poll until the run of ``m`` rows just started ends; return the final counters.

        ``began`` is the device's cycle count before the run, ``poll()`` returns its
        :class:`~hwgen.protocol.CounterValues`. The first poll comes when the run should be
        over: the cycle model's count times the seconds per device cycle seen so far (the clock
        period at first, far longer on a simulated board). A poll that finds the device busy
        and well on its way measures the rate from the cycles done and sleeps until the rest
        should be done; one that finds it barely started doubles the estimate. A run that is
        over at the first poll shortens the estimate a little, to follow a device that got
        faster. So a run usually costs one COUNTERS round trip, and now and then two.

        Raises
        ------
        BusyTimeout
            Naming ``stage``, if the run goes on ``timeout`` seconds past its expected end.
        """
        expected = self._expected.get(m)
        if expected is None:  # the cycle model takes milliseconds: once per batch size
            expected = self._expected[m] = program_cycles(self._program, m)
        spc = self.seconds_per_cycle
        t_run = time.monotonic()
        deadline = t_run + expected * spc + self.timeout
        wait = min(expected * spc, self.timeout)
        first = True
        while True:
            if wait >= _SLEEP_MIN_S:
                time.sleep(wait)
            counters = poll()
            now = time.monotonic()
            if not counters.busy:
                if first:
                    self.seconds_per_cycle = spc * 0.95
                return counters
            first = False
            done = counters.cycles - began
            if done > 0 and done >= expected / 4:
                spc = (now - t_run) / done  # a sample large enough to trust
            else:
                spc *= 2
            self.seconds_per_cycle = spc
            deadline = max(deadline, t_run + expected * spc + self.timeout)
            if now > deadline:
                raise BusyTimeout(
                    f"{stage}: the program is still running {now - t_run:.1f} s after RUN "
                    f"batch={m} ({done} of the expected {expected} cycles done)")
            wait = (expected - done) * spc * 1.05
            wait = min(max(wait, _POLL_MIN_S), _POLL_MAX_S, max(0.0, deadline - now))
