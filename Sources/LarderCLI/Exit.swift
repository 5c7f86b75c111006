/// Ends the process with a status, without an error line (the report said it all).
///
/// ```swift
/// if !report.isClean { throw Exit(code: 1) }
/// ```
struct Exit: Error {
  let code: Int32
}
