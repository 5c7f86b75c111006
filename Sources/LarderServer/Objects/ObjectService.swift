import Foundation
import Larder
import LarderCrypto

/// The object operations every wire protocol shares (write, read, list, patch, delete, copy,
/// compose), whatever the protocol: the Firebase REST API, the GCS JSON API, V4 signed URLs
/// and the console are adapters that parse a request, call one of these and shape the answer.
///
/// Each operation reads the object's row once and asks the policy once, then hands the row it
/// judged down to the store, whose write is conditional on that row (``JudgedObject``,
/// ``ObjectStore/put(_:staged:options:expecting:admission:)``) instead of reading it again. A
/// write whose early question could not be answered on what the client declares (the rules
/// read what only the bytes tell) is asked once more inside the write, on the real content;
/// so is one whose row changed meanwhile.
///
/// ```swift
/// let service = ObjectService(context: context)
/// let judged = try service.judgeWrite(.declared(bucket: b, name: n, size: 5, options: options), at: path, identity: id)
/// let object = try service.publish(staged, at: path, options: options, judged: judged, identity: id)
/// ```
struct ObjectService {
  let context: ServiceContext
  var larder: Larder { context.larder }

  // MARK: - write

  /// The early question of a write, on what the client declares, before any byte: reads the
  /// row at `path` once, runs `check` on it (a client's preconditions), and asks the policy
  /// about a `create`, or an `update` of that row. Allowed by a policy that allows only on what
  /// it knows (``AccessPolicy/allowsOnlyOnKnownFields``), the write is admitted on that row;
  /// otherwise (undecided, or a policy that wants its say on the content) it is asked again
  /// inside the write.
  /// - Throws: ``AccessError/denied(reason:)``, what `check` throws, the store's error reading the row.
  func judgeWrite(
    _ incoming: AccessResource, at path: ObjectPath, identity: Identity?,
    check: (StoredObject?) throws -> Void = { _ in }
  ) throws -> JudgedObject {
    let existing = try larder.objects.find(path)
    try check(existing)
    let decision = context.policy.decide(
      AccessRequest(
        operation: existing == nil ? .create : .update, bucket: incoming.bucket, name: incoming.name,
        identity: identity, resource: existing.map(ServiceContext.asKnownNow), incoming: incoming))
    guard decision.allowed || decision.undecided else { throw AccessError.denied(reason: decision.reason) }
    return JudgedObject(existing, admitted: decision.allowed && context.policy.allowsOnlyOnKnownFields)
  }

  /// Publishes `staged` at `path` over the row `judged` (see ``judgeWrite(_:at:identity:check:)``);
  /// `admission` (the policy's, with a protocol's preconditions) is asked only where the early
  /// question was undecided, the row changed since, or the content is not the size the early
  /// question was asked about (`declaredSize`, when one was declared).
  /// - Throws: what the store's write and `admission` throw.
  func publish(
    _ staged: StagedBlob, at path: ObjectPath, options: ObjectWriteOptions, judged: JudgedObject?,
    declaredSize: Int64? = nil, identity: Identity?, admission: (any ObjectAdmission)? = nil
  ) throws -> StoredObject {
    let admission = admission ?? context.admission(for: identity)
    guard var judged else {
      return try larder.objects.put(path, staged: staged, options: options, admission: admission)
    }
    if let declaredSize, declaredSize != staged.size { judged.admitted = false }
    return try larder.objects.put(
      path, staged: staged, options: options, expecting: judged, admission: admission)
  }

  // MARK: - read

  /// The object at `path` for a caller who may `get` it, or who holds one of its download
  /// tokens (`token`, which grants only its content: `media`). One row read (none while the
  /// cached row is current) and at most one question.
  /// - Throws: 403 (``AccessError``), 404.
  func read(_ path: ObjectPath, identity: Identity?, token: String?, media: Bool) throws -> (
    object: StoredObject, memo: ObjectMemo?
  ) {
    let (found, rowMemo) = try larder.objects.findMemoized(path)
    let object = found.map(context.knowingMD5)
    // What is derived from the cached row serves that row only, not one whose MD5 was just computed.
    let memo = object?.file.md5 == found?.file.md5 ? rowMemo : nil
    let token = token.map { Array($0.utf8) }
    let tokenGrants =
      media && token != nil
      && object?.downloadTokens.contains { constantTimeEquals(Array($0.utf8), token!) } == true
    if !tokenGrants {
      try context.authorize(
        AccessRequest(
          operation: .get, bucket: path.bucket, name: path.name, identity: identity,
          resource: object.map { object in
            memo?.value { context.resource(object) } ?? context.resource(object)
          }))
    }
    guard let object else { throw LarderError.notFound(bucket: path.bucket, name: path.name) }
    return (object, memo)
  }

  /// The object at `path` once the policy allowed `operation` on it (asked about it, or about
  /// nothing there), of `generation` if the caller names one.
  /// - Throws: 403 (``AccessError``), 404.
  func judged(_ path: ObjectPath, operation: AccessOperation, identity: Identity?, generation: Int64? = nil)
    throws -> StoredObject
  {
    let object = try larder.objects.find(path)
    try context.authorize(
      AccessRequest(
        operation: operation, bucket: path.bucket, name: path.name, identity: identity,
        resource: object.map(context.resource)))
    guard let object, generation.map({ $0 == object.generation }) ?? true else {
      throw LarderError.notFound(bucket: path.bucket, name: path.name)
    }
    return object
  }

  // MARK: - patch, delete

  /// Applies `patch` to the object at `path` as the policy judged it: the update is pinned to
  /// the row judged (its generation and metageneration), and `check` (a client's preconditions)
  /// runs on that same row, so both hold for what is changed or the answer is 412.
  func update(
    _ patch: ObjectPatch, path: ObjectPath, identity: Identity?,
    check: (StoredObject) throws -> Void = { _ in }
  ) throws -> StoredObject {
    var patch = patch
    let current = try larder.objects.find(path)
    let incoming = current.map { object -> AccessResource in
      var next = context.resource(object)
      if let t = patch.contentType { next.contentType = t ?? "application/octet-stream" }
      if patch.clearMetadata { next.metadata = [:] }
      for (k, v) in patch.metadata ?? [:] { next.metadata[k] = v }
      return next
    }
    try context.authorize(
      AccessRequest(
        operation: .update, bucket: path.bucket, name: path.name, identity: identity,
        resource: current.map(context.resource), incoming: incoming))
    // Applied only to the row that was judged (same generation and metageneration), else 412.
    if let current { try check(current) }
    patch.ifGenerationMatch = current?.generation
    patch.ifMetagenerationMatch = current?.metageneration
    return try larder.objects.update(path, patch: patch)
  }

  /// Deletes the object at `path` if the policy allows it: only the row that was judged (if it
  /// was replaced meanwhile, 412), of the generation the caller asked for, if it asked.
  /// - Throws: 403, 404, 412.
  func delete(
    _ path: ObjectPath, identity: Identity?, ifGenerationMatch asked: Int64? = nil, generation: Int64? = nil,
    check: (StoredObject) throws -> Void = { _ in }
  ) throws {
    let current = try judged(path, operation: .delete, identity: identity, generation: generation)
    try check(current)
    try larder.objects.delete(
      path,
      ifGenerationMatch: try ServiceContext.pin(asked: asked, seen: current.generation, operation: "delete"))
  }

  // MARK: - list

  /// One page of a listing with only the entries the caller may list: rules see the folder
  /// being listed, and each entry's own folder when the listing reaches into subfolders.
  func list(
    bucket: String, prefix: String, delimiter: String?, maxResults: Int, pageToken: String?,
    identity: Identity?,
    range: ListingRange = .init()
  ) throws -> ObjectListing {
    // Rules see the folder being listed, as Firebase's list rules do. A prefix is a string
    // prefix, so `users/al` also matches `users/alice/…`: the folder asked about is the deepest
    // whole folder the prefix names (`users`), never `users/al`, which a user `al` could own.
    let folder = Self.folder(ofPrefix: prefix)
    try context.authorize(AccessRequest(operation: .list, bucket: bucket, name: folder, identity: identity))
    let page = try larder.objects.list(
      bucket: bucket, prefix: prefix, delimiter: delimiter, maxResults: maxResults, pageToken: pageToken,
      range: range)
    var folders = ListableFolders(context: context, bucket: bucket, identity: identity, listed: folder)
    return ObjectListing(
      prefixes: page.prefixes.filter { folders.allow($0) }, items: page.items.filter { folders.allow($0.name) },
      nextPageToken: page.nextPageToken)
  }

  /// Without a `/` delimiter a listing reaches into subfolders: each entry is shown (or, for the
  /// console's folder delete, touched) only if its own folder may be listed too, asked once per
  /// folder. The folder the caller listed was judged already.
  struct ListableFolders {
    let context: ServiceContext
    let bucket: String
    let identity: Identity?
    private var decisions: [String: Bool]

    init(context: ServiceContext, bucket: String, identity: Identity?, listed folder: String) {
      self.context = context
      self.bucket = bucket
      self.identity = identity
      decisions = [folder: true]
    }

    /// Whether the folder of `entry` (an object name, or a prefix ending in `/`) may be listed.
    mutating func allow(_ entry: String) -> Bool {
      let parent = ObjectService.folder(ofPrefix: entry.hasSuffix("/") ? String(entry.dropLast()) : entry)
      if let known = decisions[parent] { return known }
      let allowed = context.policy.decide(
        AccessRequest(operation: .list, bucket: bucket, name: parent, identity: identity)
      ).allowed
      decisions[parent] = allowed
      return allowed
    }
  }

  /// The folder a list prefix names: everything before its last `/` (`a/b/c` → `a/b`, `a/b/` → `a/b`).
  static func folder(ofPrefix prefix: String) -> String {
    guard let slash = prefix.lastIndex(of: "/") else { return "" }
    return String(prefix[..<slash])
  }

  /// Whether the caller may `get` `object` (a write's answer carries its download tokens only
  /// then; a listing shows its metadata only then).
  func mayGet(_ object: StoredObject, identity: Identity?) -> Bool {
    context.policy.decide(
      AccessRequest(
        operation: .get, bucket: object.bucket, name: object.name, identity: identity,
        resource: context.resource(object))
    ).allowed
  }

  // MARK: - copy, compose

  /// Makes `destination` a copy of `source` (no byte copied: content is addressed), pinned to
  /// the source row the policy judged for `get`; `options` makes the destination's metadata
  /// from the source, `admission` judges the destination's write.
  /// - Throws: 403, 404, 412 and what the store's copy throws.
  func copy(
    from source: ObjectPath, to destination: ObjectPath, identity: Identity?, sourceGeneration: Int64?,
    check: (StoredObject) throws -> Void, options: @escaping (StoredObject) throws -> ObjectWriteOptions,
    admission: any ObjectAdmission
  ) throws -> StoredObject {
    let judged = try judged(source, operation: .get, identity: identity, generation: sourceGeneration)
    try check(judged)
    _ = try options(judged)
    return try larder.objects.copy(
      from: source, to: destination,
      check: { found in
        guard found.generation == judged.generation, found.metageneration == judged.metageneration else {
          throw LarderError.preconditionFailed("the source object changed during the copy")
        }
      },
      options: options, admission: admission)
  }

  /// A source of ``compose(_:to:options:identity:check:charge:admission:)``: its name, the
  /// generation asked for, and an `ifGenerationMatch` of its own.
  struct ComposeSource {
    var name: String
    var generation: Int64?
    var ifGenerationMatch: Int64?
  }

  /// Concatenates `sources` (each judged for `get`) into new content at `destination`, judged
  /// once as a write of that size; `charge` is asked for the whole size before a byte is copied.
  /// - Throws: 403, 404, 412, 413, and what `charge` and the store throw.
  func compose(
    _ sources: [ComposeSource], to destination: ObjectPath, options: (StoredObject) -> ObjectWriteOptions,
    identity: Identity?, check: (StoredObject?) throws -> Void, charge: (Int64) throws -> Void,
    admission: any ObjectAdmission
  ) throws -> StoredObject {
    var found: [StoredObject] = []
    var total: Int64 = 0
    for source in sources {
      let path = try ObjectPath(bucket: destination.bucket, name: source.name)
      let object = try judged(path, operation: .get, identity: identity, generation: source.generation)
      if let match = source.ifGenerationMatch, match != object.generation {
        throw LarderError.preconditionFailed(
          "source \(source.name.prefix(100)): the generation is \(object.generation), not \(match)")
      }
      found.append(object)
      total += object.file.size
    }
    if total > context.maxUploadSize { throw LarderError.sizeLimitExceeded(limit: context.maxUploadSize) }
    let options = options(found[0])
    try options.validate()
    let judged = try judgeWrite(
      .declared(bucket: destination.bucket, name: destination.name, size: total, options: options),
      at: destination,
      identity: identity, check: check)
    // New content from a request of a few hundred bytes: charged whole before a byte is copied.
    try charge(total)
    // Each source's bytes are read once, into the new content.
    let writer = try larder.files.makeWriter(
      options: .init(sizeLimit: context.maxUploadSize, computeMD5: true))
    do {
      for object in found { try larder.files.read(object.file) { try writer.write($0) } }
    } catch {
      writer.cancel()
      throw error
    }
    return try publish(
      try writer.finish(), at: destination, options: options, judged: judged, declaredSize: total,
      identity: identity, admission: admission)
  }
}
