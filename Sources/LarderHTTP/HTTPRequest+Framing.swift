import Foundation

extension HTTPRequest {
  /// Why a request head's body framing cannot be trusted, or nil.
  ///
  /// These are the request-smuggling class (RFC 9112 §6.1, §6.3): a proxy in front of Larder
  /// and Larder itself could disagree on where the body ends, so the rest of the connection
  /// is not read at all. The server answers and closes. A `Content-Length` list (`5, 5`) is
  /// refused like two fields: a reader that took only the first would disagree with one that sums them.
  static func framingError(headers: HTTPHeaders, version: String) -> HTTPRequestError? {
    let encodings = headers.values(for: "Transfer-Encoding")
    let lengths = headers.values(for: "Content-Length")
    if !encodings.isEmpty {
      if !lengths.isEmpty { return .contentLengthWithTransferEncoding }
      let codings = encodings.flatMap { $0.split(separator: ",") }.map {
        $0.trimmingCharacters(in: .whitespaces).lowercased()
      }
      if codings != ["chunked"] { return .unsupportedTransferEncoding(encodings.joined(separator: ", ")) }
    }
    if lengths.count > 1 || lengths.contains(where: { $0.contains(",") }) { return .conflictingContentLength }
    if version == "HTTP/1.1" && headers.values(for: "Host").count != 1 { return .missingHost }
    return nil
  }
}
