"""Well-known import names that differ from the names of the distributions that install them.

`-v` asks which imports a project declares as dependencies (opscan.commands.lint):
`import serial` is a library when the project requires `pyserial`. Only names that
differ beyond PEP 503 normalisation are here (`dynamixel_sdk` already reads as
`dynamixel-sdk`); distribution names are written as projects declare them.
"""

from __future__ import annotations

DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "Bio": ("biopython",),
    "Crypto": ("pycryptodome", "pycrypto"),
    "OpenGL": ("PyOpenGL",),
    "OpenSSL": ("pyOpenSSL",),
    "PIL": ("Pillow", "pillow-simd"),
    "_jsonnet": ("jsonnet",),
    "absl": ("absl-py",),
    "ahocorasick": ("pyahocorasick",),
    "bs4": ("beautifulsoup4",),
    "can": ("python-can",),
    "cv2": ("opencv-python", "opencv-python-headless", "opencv-contrib-python", "opencv-contrib-python-headless"),
    "dateutil": ("python-dateutil",),
    "dotenv": ("python-dotenv",),
    "faiss": ("faiss-cpu", "faiss-gpu"),
    "fitz": ("PyMuPDF",),
    "git": ("GitPython",),
    "google": ("protobuf", "googleapis-common-protos", "google-auth", "google-cloud-storage", "google-api-python-client"),
    "grpc": ("grpcio",),
    "grpc_tools": ("grpcio-tools",),
    "hebi": ("hebi-py",),
    "hid": ("hidapi",),
    "jwt": ("PyJWT",),
    "magic": ("python-magic",),
    "model_archiver": ("torch-model-archiver",),
    "pkg_resources": ("setuptools",),
    "pytorch_grad_cam": ("grad-cam",),
    "rerun": ("rerun-sdk",),
    "scservo_sdk": ("feetech-servo-sdk",),
    "serial": ("pyserial",),
    "skimage": ("scikit-image",),
    "sklearn": ("scikit-learn",),
    "tree": ("dm-tree",),
    "ts": ("torchserve",),
    "usb": ("pyusb",),
    "websocket": ("websocket-client",),
    "yaml": ("PyYAML",),
    "zmq": ("pyzmq",),
}
