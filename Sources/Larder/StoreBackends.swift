/// The catalogs and blob stores a ``Larder`` can open besides its embedded default (SQLite and
/// files in the data directory), each implemented in a target of its own so that an app that
/// uses the embedded store builds and links only SQLite, libmagic and libcrypto.
///
/// ```swift
/// import LarderPostgres
/// import LarderS3Store
/// let larder = try Larder(at: dataURL, configuration: .init(
///   catalog: try CatalogLocation(parsing: "postgres://larder@db/larder"),
///   blobs: try BlobLocation(parsing: "s3://media?endpoint=http://127.0.0.1:18080&path-style=1"),
///   backends: [.postgres, .s3]))
/// ```
/// A location whose backend is not given is refused at open with a
/// ``LarderError/invalidArgument(_:)`` naming the module that has it.
public struct StoreBackends: Sendable, ExpressibleByArrayLiteral {
  /// Opens a catalog engine for a `postgres://` URL.
  package var postgres: (@Sendable (_ location: CatalogLocation) throws -> any CatalogEngine)?
  /// Opens the content store for an `s3://` URL and its credentials file, over the store's catalog.
  package var s3: (@Sendable (_ url: String, _ credentialsFile: String?, _ catalog: Catalog) throws -> any ContentStore)?

  /// The embedded store only.
  public static let embedded = StoreBackends(postgres: nil, s3: nil)

  package init(
    postgres: (@Sendable (CatalogLocation) throws -> any CatalogEngine)? = nil,
    s3: (@Sendable (String, String?, Catalog) throws -> any ContentStore)? = nil
  ) {
    self.postgres = postgres
    self.s3 = s3
  }

  /// Every backend of `elements` (a later one replaces an earlier one of the same kind).
  public init(arrayLiteral elements: StoreBackends...) {
    for element in elements {
      if let postgres = element.postgres { self.postgres = postgres }
      if let s3 = element.s3 { self.s3 = s3 }
    }
  }
}
