/// The object a request read and judged before writing over it (``current``, nil when there
/// was none), handed down to the write so that it replaces exactly that row without reading
/// it again (``ObjectStore/put(_:staged:options:expecting:admission:)``).
///
/// ```swift
/// let current = try larder.objects.find(path)            // the one read of the row
/// // … the policy allows the write on `current` and what the client declared …
/// try larder.objects.put(path, staged: staged, expecting: JudgedObject(current, admitted: true), admission: policy)
/// ```
public struct JudgedObject: Sendable {
  /// The row as read (nil: no object was at the name).
  public var current: StoredObject?
  /// Whether the write's admission question was answered already, on ``current`` and on what
  /// the write declares, so that the content cannot change the answer: the store then asks it
  /// only if the row changed meanwhile.
  public var admitted: Bool

  public init(_ current: StoredObject?, admitted: Bool) {
    self.current = current
    self.admitted = admitted
  }
}
