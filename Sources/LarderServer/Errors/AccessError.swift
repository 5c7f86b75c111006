/// The policy refused a request. The `reason` is for the log (with the request id); the client
/// only ever reads "permission denied".
///
/// ```swift
/// let decision = policy.decide(request)
/// guard decision.allowed else { throw AccessError.denied(reason: decision.reason) }
/// ```
public enum AccessError: Error, Sendable, Equatable {
  case denied(reason: String)

  public var code: String {
    switch self {
    case .denied: "permission-denied"
    }
  }
}
