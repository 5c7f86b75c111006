import Foundation
import Synchronization

/// Builds and saves test models (Daikiri's `Factory`): defaults per type, overrides, a sequence
/// number per factory, related models created first with their references, files attached from
/// generated content.
///
/// ```swift
/// let users = ModelFactory<User> { n, _ in User(id: "user-\(n)", name: "User \(n)") }
/// let posts = ModelFactory<Post> { n, make in
///   Post(id: "post-\(n)", authorID: try make.create(users).id,      // a new user for each post
///        title: "Post \(n)", cover: try make.file("cover \(n)"))    // a stored file
/// }
/// let ada = try users.create(in: larder) { $0.name = "Ada" }         // user-1, named Ada
/// let three = try posts.create(3, in: larder) { post, i in post.title = "#\(i)" }
/// ```
/// A model and everything its builder created are saved in one transaction, related models
/// first, so references and attachments hold; the files are stored before it.
public final class ModelFactory<T: Model>: Sendable {
  public typealias Builder = @Sendable (_ sequence: Int, _ make: FactoryContext) throws -> T

  private let builder: Builder
  private let counter = Mutex(0)

  public init(_ builder: @escaping Builder) { self.builder = builder }

  /// The next sequence number: 1, 2, 3, … per factory.
  func nextSequence() -> Int {
    counter.withLock {
      $0 += 1
      return $0
    }
  }

  /// Builds one model (and what it needs), applies `override`, saves it all; returns it.
  @discardableResult
  public func create(in larder: Larder, _ override: (inout T) throws -> Void = { _ in }) throws -> T {
    let context = FactoryContext(larder: larder)
    var model = try build(context)
    try override(&model)
    try context.save(model)
    return model
  }

  /// `count` models, each in its own transaction; `override` gets the model and its index.
  @discardableResult
  public func create(_ count: Int, in larder: Larder, _ override: (inout T, Int) throws -> Void = { _, _ in })
    throws
    -> [T]
  {
    try (0..<count).map { i in try create(in: larder) { try override(&$0, i) } }
  }

  func build(_ context: FactoryContext) throws -> T { try builder(nextSequence(), context) }
}

/// What a factory's builder uses to create related models and files.
public final class FactoryContext {
  let larder: Larder
  /// Saves of the related models, in creation order (a model's own relations before it).
  private var pending: [(ModelTransaction) throws -> Void] = []

  init(larder: Larder) { self.larder = larder }

  /// A related model from another factory, saved before the model being built.
  @discardableResult
  public func create<R: Model>(_ factory: ModelFactory<R>, _ override: (inout R) throws -> Void = { _ in })
    throws -> R
  {
    var model = try factory.build(self)
    try override(&model)
    pending.append { try $0.save(model) }
    return model
  }

  /// A stored file of these bytes (stored now, kept by the model that holds it).
  public func file(_ data: Data, filename: String? = nil, contentType: String? = nil) throws -> File {
    try larder.files.put(data, filename: filename, declaredContentType: contentType)
  }

  /// A stored file of this text, UTF-8.
  public func file(_ text: String, filename: String? = nil) throws -> File {
    try file(Data(text.utf8), filename: filename, contentType: "text/plain")
  }

  func save<T: Model>(_ model: T) throws {
    try larder.write { tx in
      for save in pending { try save(tx) }
      try tx.save(model)
    }
  }
}

@available(*, unavailable)
extension FactoryContext: Sendable {}
