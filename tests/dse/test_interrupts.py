"""hwgen.dse.interrupts: Ctrl-C (a real SIGINT to this process) is held back outside the
marked waits and raised at the next one, or on leaving."""

import os
import signal
import threading

import pytest

from hwgen.dse.interrupts import DeferredInterrupts


@pytest.fixture(autouse=True)
def _main_thread():
    # Python runs signal handlers in the main thread only (pytest and its xdist workers run
    # tests there).
    assert threading.current_thread() is threading.main_thread()


def _ctrl_c():
    os.kill(os.getpid(), signal.SIGINT)   # Python runs the handler before the next line


def test_an_interrupt_inside_a_wait_is_raised_there():
    with DeferredInterrupts() as interrupts:
        with pytest.raises(KeyboardInterrupt), interrupts.waiting():
            _ctrl_c()
        # Taken once: the next wait runs.
        with interrupts.waiting():
            pass


def test_an_interrupt_outside_a_wait_comes_at_the_next_wait():
    steps = []
    with DeferredInterrupts() as interrupts:
        _ctrl_c()
        steps.append("after the interrupt")   # a call to Dask here would finish
        with pytest.raises(KeyboardInterrupt), interrupts.waiting():
            steps.append("waited")
    assert steps == ["after the interrupt"]


def test_an_interrupt_after_the_last_wait_comes_on_leaving():
    previous = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt), DeferredInterrupts():
        _ctrl_c()
    assert signal.getsignal(signal.SIGINT) is previous
    # Without one, nothing is raised and the handler is put back.
    with DeferredInterrupts() as interrupts, interrupts.waiting():
        pass
    assert signal.getsignal(signal.SIGINT) is previous


def test_outside_the_main_thread_nothing_changes():
    seen = []

    def run():
        with DeferredInterrupts() as interrupts, interrupts.waiting():
            seen.append(signal.getsignal(signal.SIGINT))

    previous = signal.getsignal(signal.SIGINT)
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [previous]


def test_each_item_is_waited_for_interruptibly():
    def items():
        yield 1
        _ctrl_c()   # while the loop waits for the second item
        yield 2

    seen = []
    with DeferredInterrupts() as interrupts:
        assert list(interrupts.each([1, 2, 3])) == [1, 2, 3]
        with pytest.raises(KeyboardInterrupt):
            for item in interrupts.each(items()):
                seen.append(item)
    assert seen == [1]
