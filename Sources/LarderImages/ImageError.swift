/// Why a variant was not made. The HTTP status is decided in one place (the server's APIError).
public enum ImageError: Error, Sendable, Equatable, CustomStringConvertible {
  /// A parameter out of range or unknown (400).
  case invalidParameter(String)
  /// The source is not an image Larder transforms, by its detected type (415).
  case notAnImage(detectedType: String)
  /// The source's bytes exceed the byte limit (413).
  case sourceTooLarge(size: Int64, limit: Int64)
  /// The source's header says more pixels than the limit; nothing was decoded (422).
  case tooManyPixels(width: Int, height: Int, limit: Int64)
  /// libvips could not decode or encode it (422).
  case decodeFailed(String)
  /// The render queue is full (503 with Retry-After).
  case busy
  /// This client has its share of the render pool queued or running (429 with Retry-After).
  case clientBusy
  /// Image transformations are turned off (`--image-transforms off`) (400).
  case disabled

  public var code: String {
    switch self {
    case .invalidParameter: "image.invalid_parameter"
    case .notAnImage: "image.not_an_image"
    case .sourceTooLarge: "image.source_too_large"
    case .tooManyPixels: "image.too_many_pixels"
    case .decodeFailed: "image.decode_failed"
    case .busy: "image.busy"
    case .clientBusy: "image.client_busy"
    case .disabled: "image.disabled"
    }
  }

  public var description: String {
    switch self {
    case .invalidParameter(let m): m
    case .notAnImage(let t): "the object is not an image that can be transformed (detected type \(t))"
    case .sourceTooLarge(let size, let limit):
      "the source image is \(size) bytes; images above \(limit) bytes are not transformed"
    case .tooManyPixels(let w, let h, let limit):
      "the source image is \(w)x\(h) (\(Int64(w) * Int64(h)) pixels); images above \(limit) pixels are not transformed"
    case .decodeFailed(let reason): "the image could not be transformed: \(reason)"
    case .busy: "too many image renders are queued; retry"
    case .clientBusy: "you have as many image renders in progress as one client may; retry when one is done"
    case .disabled: "image transformations are turned off on this server"
    }
  }
}
