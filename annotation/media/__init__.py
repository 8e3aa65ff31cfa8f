"""Media assets: the images and videos items show, stored once by content hash.

probe.py   what a file on disk holds, without Django: the video probe (ffprobe, or ``ffmpeg -i``),
           finding ffmpeg, the file hash; shared with inference's frame sampling (inference/media.py)
assets.py  validating a file an import brings (its real type, size, first frame) and storing it as
           a MediaAsset under ``assets/<sha[:2]>/<sha256><ext>``
access.py  who may read which file under MEDIA_ROOT, and as what type

Serving /media/ is a page like the others: annotation/views/media.py (Range, the sandbox headers,
presigned redirects), which asks access.py. This file imports nothing, so that probe.py stays
importable without Django.
"""
