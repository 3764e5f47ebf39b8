/// The queue as the manager holds it, with what the store has not taken yet: the one home of the transactions.
///
/// A change made for a client is a transaction: ``DownloadQueue`` records the rows it touched, ``write(options:)``
/// says what to store, and then ``stored()`` makes it count, or ``refused()`` takes it back (the change was never
/// made). A change the queue makes by itself (a run's record, its end) stands even when the store refuses it
/// (``fellBehind()``): the download did what it did, and the next write stores the whole queue. What is changed
/// and not yet stored between transactions is a run's record (``hasPendingRecord``), stored with the next change
/// or on its own.
struct QueueLedger: Sendable {
    let store: QueueStore
    var queue = DownloadQueue()
    /// Set when a change the queue made by itself could not be stored: the next write stores the whole queue.
    private(set) var storeIsBehind = false

    init(store: QueueStore) {
        self.store = store
    }

    /// Whether changes wait to be stored.
    var hasPendingRecord: Bool { !self.queue.changes.isEmpty || self.storeIsBehind }

    /// What to store for the changes made since the last write: their rows, or everything for a store that fell
    /// behind; and `options` when they changed (`current`, the stored ones, go with a whole write). `nil` when there
    /// is nothing to store.
    func write(options: [QueueOption]?, current: [QueueOption]) -> QueueStore.Write? {
        if self.storeIsBehind { return .whole(self.queue, options: options ?? current) }
        guard !self.queue.changes.isEmpty || options != nil else { return nil }
        return .changes(self.queue.changes, options: options)
    }

    /// The write is committed: the changes count.
    mutating func stored() {
        self.queue.acceptChanges()
        self.storeIsBehind = false
    }

    /// A transaction's write was refused, or its change failed: the queue is as it was before it.
    mutating func refused() {
        self.queue.revertChanges()
    }

    /// A change the queue made by itself could not be stored: it stands, and the next write stores everything.
    mutating func fellBehind() {
        self.queue.acceptChanges()
        self.storeIsBehind = true
    }
}
