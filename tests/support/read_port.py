"""A Python model of a memory read port (plain or registered), for the feeders' tests."""

class ReadPortModel:
    """A memory's read port as :func:`hwgen.device.host_access.share_read` gives it to a block.

    Plain reads: the word at an enabled read's address, the cycle after. Registered reads: the
    port reads its address when enabled (into its data, the cycle after), and a register after
    it takes the port's data when told (``take``): the block sees a word two cycles after its
    address. ``words`` maps addresses to words; other addresses read ``poison``.
    """

    def __init__(self, words, *, registered, poison):
        self.words = words
        self.registered = registered
        self.poison = poison
        self.port = poison
        self.data = poison

    def read(self, addr):
        return self.words.get(addr, self.poison)

    def clock(self, addr, en, take=False):
        """Take one clock edge with this cycle's request; return the block's word of the next
        cycle."""
        if self.registered:
            taken = self.port if take else self.data
            if en:
                self.port = self.read(addr)
            self.data = taken
        elif en:
            self.data = self.read(addr)
        return self.data
