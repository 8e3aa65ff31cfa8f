"""Other tools' formats in and out of StateLab: Hugging Face dataset folders, COCO for box releases."""
