"""Other tools' formats in and out of StateLab: COCO for box releases."""
