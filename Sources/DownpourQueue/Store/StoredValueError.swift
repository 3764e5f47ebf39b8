/// A value in the queue database that cannot be read back.
struct StoredValueError: Error, CustomStringConvertible {
    var description: String
}
