// Uploads a file to a tus server with tus-js-client (Node), as a user would.
//
//   node tusjs_upload.js URL FILE NAME [--abort-at N] [--resume UPLOAD_URL] [--chunk N] [--store FILE] [--parallel N]
//
// --abort-at aborts the upload (upload.abort(), as a user's cancel) once
// the server confirmed at least N bytes, and prints "url URL"; --resume
// continues that upload: tus-js-client HEADs it and PATCHes from the
// server's offset. Prints "start N" (the offset it resumed from) and
// "offset N" at the end. --store keeps upload URLs in FILE
// (tus.FileUrlStorage) under the file's fingerprint, and a run with the
// same FILE resumes the upload it finds there (findPreviousUploads, as the
// tus-js-client docs show), HEADing it first; "previous URL" says so.
// --parallel N sends the file as N partial uploads at once, joined by a
// final upload (parallelUploads: the tus concatenation extension).
const path = require("path");
module.paths.unshift(path.join(process.env.TUS_NODE_DIR || ".", "node_modules"));
const fs = require("fs");
const tus = require("tus-js-client");

const args = process.argv.slice(2);
const [url, file, name] = args;
const opt = (k) => {
  const i = args.indexOf(k);
  return i >= 0 ? args[i + 1] : undefined;
};
const abortAt = opt("--abort-at") ? Number(opt("--abort-at")) : 0;
const resume = opt("--resume");
const chunk = Number(opt("--chunk") || 256 * 1024);
const store = opt("--store");
const parallel = Number(opt("--parallel") || 1);

const size = fs.statSync(file).size;
const upload = new tus.Upload(fs.createReadStream(file), {
  endpoint: url,
  uploadUrl: resume || null,
  chunkSize: chunk,
  // tus-js-client refuses uploadSize with parallelUploads (it takes
  // the size from the file).
  ...(parallel > 1 ? {} : { uploadSize: size }),
  metadata: { filename: name },
  retryDelays: [0, 500, 1000],
  ...(parallel > 1 ? { parallelUploads: parallel } : {}),
  ...(store ? { urlStorage: new tus.FileUrlStorage(store) } : {}),
  onChunkComplete(chunkSize, accepted, total) {
    if (abortAt && accepted >= abortAt) {
      upload.abort().then(() => {
        console.log("url " + upload.url);
        console.log("offset " + accepted);
        process.exit(0);
      });
    }
  },
  onError(err) {
    console.error("error " + err);
    process.exit(1);
  },
  onSuccess() {
    console.log("url " + upload.url);
    console.log("offset " + size);
  },
});
if (resume) {
  // uploadUrl makes tus-js-client HEAD the upload first.
  console.log("resume " + resume);
}
if (store) {
  upload.findPreviousUploads().then((prev) => {
    if (prev.length > 0) {
      console.log("previous " + prev[0].uploadUrl);
      upload.resumeFromPreviousUpload(prev[0]);
    }
    upload.start();
  });
} else {
  upload.start();
}
