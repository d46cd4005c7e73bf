"""A rate over a window of samples, measured as Kafka's Rate of a SampledStat measures it.

The window is ``samples`` samples of ``sample_ms`` each; a sample older than the whole window
is forgotten. The rate divides what the retained samples hold by the time they span, but by no
less than ``samples - 1`` whole samples: a client that has just started is measured over the
full window, so a short burst does not count as a high rate (and is not throttled at once)."""

from __future__ import annotations

from collections import deque


class SampledRate:
    """Owned by one ClientQuotas; event-loop thread only. Times are milliseconds."""

    def __init__(self, samples: int, sample_ms: int) -> None:
        self.samples = samples
        self.sample_ms = sample_ms
        self._samples: deque[list[float]] = deque()  # [start ms, value]

    def _purge(self, now_ms: float) -> None:
        while self._samples and now_ms - self._samples[0][0] >= self.samples * self.sample_ms:
            self._samples.popleft()

    def record(self, value: float, now_ms: float) -> None:
        self._purge(now_ms)
        if not self._samples or now_ms >= self._samples[-1][0] + self.sample_ms:
            self._samples.append([now_ms, 0.0])
            if len(self._samples) > self.samples:
                self._samples.popleft()
        self._samples[-1][1] += value

    def window_ms(self, now_ms: float) -> float:
        """The time the rate is taken over (Kafka's Rate.windowSize)."""
        self._purge(now_ms)
        elapsed = now_ms - self._samples[0][0] if self._samples else 0.0
        full = int(elapsed // self.sample_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.sample_ms
        return max(elapsed, 1.0)

    def rate(self, now_ms: float) -> float:
        """Per second."""
        window = self.window_ms(now_ms)
        return sum(value for _, value in self._samples) * 1000.0 / window
