// Drives one tus-js-client upload (the unmodified library, loaded from the bundle) as
// interop/test_tus_js.py asks, and reports what happened as one JSON object per line on stdout,
// so the test can assert the exact requests the client made and act while it runs (kill the
// server once enough bytes went out).
//
//   node upload.cjs '<spec JSON>'
//
// spec: {
//   bundle:     path of tus.node.cjs
//   endpoint:   creation URL
//   source:     {kind: "path" | "buffer" | "stream", path}  — a path reference (fs.ReadStream, what
//               apps pass), the file's bytes in memory, or a plain Readable (size unknown: for
//               uploadLengthDeferred)
//   options:    passed to tus.Upload unchanged (chunkSize, parallelUploads, metadata, …); a
//               chunkSize of null means Infinity (one PATCH), which JSON cannot spell
//   urlStorage: path of a FileUrlStorage file (so another process finds the upload), or absent
//   resume:     true → findPreviousUploads() and resumeFromPreviousUpload() of the first found
//   abortAfter: abort once this many bytes are acknowledged (onChunkComplete)
//   terminate:  with abortAfter: abort(true), which DELETEs the upload
//   throttle:   {bytesPerSecond, patches}: slow the bodies of the first `patches` PATCHes
// }
// Events: request {method, url, headers, sent, status, responseHeaders | error}, progress,
// chunk, previous, aborted, success {url}, error {message, status, cause}.
"use strict";
const { PassThrough, Readable, Transform } = require("node:stream");
const fs = require("node:fs");

const spec = JSON.parse(process.argv[2]);
const tus = require(spec.bundle);

function emit(event) {
  process.stdout.write(JSON.stringify(event) + "\n");
}

const REQUEST_HEADERS = ["Upload-Offset", "Upload-Length", "Upload-Defer-Length", "Upload-Concat",
  "Upload-Metadata", "Content-Type"];
const RESPONSE_HEADERS = ["location", "upload-offset", "upload-length", "upload-concat"];

/// Counts (and, for the first PATCHes when asked, paces) each body as the client hands it to
/// node's HTTP module, and logs every request with its answer or its error.
class ObservedHttpStack extends tus.NodeHttpStack {
  constructor() {
    super();
    this.patches = 0;
  }

  createRequest(method, url) {
    const request = super.createRequest(method, url);
    const send = request.send.bind(request);
    request.send = async (body) => {
      const record = { event: "request", method, url, headers: {}, sent: 0 };
      for (const name of REQUEST_HEADERS) {
        const value = request.getHeader(name);
        if (value !== undefined) record.headers[name] = String(value);
      }
      let rate = null;
      if (method === "PATCH") {
        this.patches += 1;
        if (spec.throttle && this.patches <= spec.throttle.patches) rate = spec.throttle.bytesPerSecond;
      }
      if (body instanceof Uint8Array) {
        record.sent = body.length;
      } else if (body instanceof Readable) {
        body = body.pipe(counter(record, rate));
      }
      try {
        const response = await send(body);
        record.status = response.getStatus();
        record.responseHeaders = {};
        for (const name of RESPONSE_HEADERS) {
          const value = response.getHeader(name);
          if (value !== undefined) record.responseHeaders[name] = value;
        }
        emit(record);
        return response;
      } catch (error) {
        record.error = String(error && (error.code || error.message));
        emit(record);
        throw error;
      }
    };
    return request;
  }
}

/// A pass-through that counts bytes and, given a rate, releases them no faster than it.
function counter(record, bytesPerSecond) {
  const started = Date.now();
  return new Transform({
    transform(chunk, _encoding, callback) {
      record.sent += chunk.length;
      if (!bytesPerSecond) return callback(null, chunk);
      const due = started + (record.sent / bytesPerSecond) * 1000;
      setTimeout(() => callback(null, chunk), Math.max(0, due - Date.now()));
    },
  });
}

function openSource(source) {
  switch (source.kind) {
    case "path": return fs.createReadStream(source.path);
    case "buffer": return fs.readFileSync(source.path);
    // Behind a PassThrough neither the size nor the path is visible: a stream of unknown length.
    case "stream": return fs.createReadStream(source.path).pipe(new PassThrough());
    default: throw new Error(`unknown source kind ${source.kind}`);
  }
}

async function main() {
  const options = { ...spec.options };
  if (options.chunkSize === null) options.chunkSize = Infinity;
  let upload;
  const finished = new Promise((resolve) => {
    upload = new tus.Upload(openSource(spec.source), {
      ...options,
      endpoint: spec.endpoint,
      httpStack: new ObservedHttpStack(),
      ...(spec.urlStorage ? { urlStorage: new tus.FileUrlStorage(spec.urlStorage) } : {}),
      onProgress(sent, total) {
        emit({ event: "progress", sent, total });
      },
      onChunkComplete(size, accepted, total) {
        emit({ event: "chunk", size, accepted, total });
        if (spec.abortAfter != null && accepted >= spec.abortAfter) {
          upload.abort(Boolean(spec.terminate)).then(
            () => { emit({ event: "aborted", url: upload.url }); resolve(0); },
            (error) => { emit({ event: "error", message: String(error), stage: "abort" }); resolve(1); });
        }
      },
      onSuccess() {
        emit({ event: "success", url: upload.url });
        resolve(0);
      },
      onError(error) {
        const response = error.originalResponse;
        const cause = error.causingError;
        emit({
          event: "error",
          message: String(error.message),
          status: response ? response.getStatus() : null,
          body: response ? response.getBody() : null,
          cause: cause ? String(cause.code || cause.message) : null,
        });
        resolve(1);
      },
    });
  });
  if (spec.resume) {
    const previous = await upload.findPreviousUploads();
    emit({ event: "previous", uploads: previous.map((p) => ({ uploadUrl: p.uploadUrl, size: p.size })) });
    if (previous.length > 0) upload.resumeFromPreviousUpload(previous[0]);
  }
  upload.start();
  process.exitCode = await finished;
}

main().catch((error) => {
  emit({ event: "error", message: String(error && error.stack), status: null, cause: "driver" });
  process.exitCode = 2;
});
