"""hwgen.fanout: one call per device, each in its own thread, results in device order, errors
handed back, and Ctrl-C passed on to the work so that it ends."""

import _thread
import threading

import pytest

from hwgen.fanout import device_name, fan_out, first_error


class Named:
    def __init__(self, url):
        self.url = url


def test_results_in_device_order_and_all_at_once():
    devices = [Named(f"dev://{i}") for i in range(4)]
    together = threading.Barrier(len(devices), timeout=10)  # only if all run at the same time

    def work(index, device):
        together.wait()
        return index, device.url, threading.current_thread().name

    results, errors = fan_out(work, devices, prefix="test")
    assert errors == {}
    assert [(i, url) for i, url, _ in results] == [(i, d.url) for i, d in enumerate(devices)]
    assert [name for *_, name in results] == [f"test-device {i} (dev://{i})" for i in range(4)]


def test_errors_are_handed_back_and_the_first_is_named():
    devices = [Named("a://"), object(), Named("c://")]

    def work(index, device):
        if index:
            raise OSError(f"link {index} broke")
        return "fine"

    results, errors = fan_out(work, devices)
    assert results == ["fine", None, None] and sorted(errors) == [1, 2]
    error = first_error(errors, devices)
    assert str(error) == "link 1 broke" and error.__notes__ == ["(on device 1 of 3)"]
    assert first_error({}, devices) is None
    assert device_name(devices[0], 0) == "device 0 (a://)"


def test_an_interrupt_stops_the_work_and_is_raised():
    release = threading.Event()
    started = threading.Barrier(2, timeout=10)
    stopped = []
    finished = []

    def stop(exc):
        stopped.append(type(exc))
        release.set()

    def work(index, device):
        started.wait()
        if index == 0:
            _thread.interrupt_main()  # Ctrl-C while the main thread waits for the devices
        assert release.wait(10), "stop() was not called"
        finished.append(index)

    with pytest.raises(KeyboardInterrupt):
        fan_out(work, [Named("a://"), Named("b://")], stop=stop)
    assert stopped == [KeyboardInterrupt]
    assert sorted(finished) == [0, 1]  # every thread ended before fan_out raised
